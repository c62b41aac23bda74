"""Persistence: SQLAlchemy Core tables, migrations and repositories."""
