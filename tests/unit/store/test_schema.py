"""The schema is declared once: a database built by the migrations has exactly the tables,
columns, keys and nullability the SQLAlchemy tables declare (the code reads and writes by
those), and a migrated database migrates again to the same."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from paddockd.store.db import Database, metadata


def _shape(engine: sa.Engine) -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    inspector = sa.inspect(engine)
    for table in inspector.get_table_names():
        if table == "schema_migrations":
            continue
        columns = {c["name"]: bool(c["nullable"]) for c in inspector.get_columns(table)}
        keys = sorted(inspector.get_pk_constraint(table)["constrained_columns"])
        found[table] = {"columns": columns, "key": keys}
    return found


def _declared() -> dict[str, dict[str, object]]:
    return {
        table.name: {
            # A primary key column is NOT NULL however it was declared.
            "columns": {c.name: bool(c.nullable) and not c.primary_key for c in table.columns},
            "key": sorted(c.name for c in table.primary_key.columns),
        }
        for table in metadata.tables.values()
    }


def test_the_migrations_build_the_declared_tables(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'p.db'}")
    db.migrate()
    built = _shape(db.engine)
    declared = _declared()
    assert sorted(built) == sorted(declared)
    for table, shape in declared.items():
        built_columns = dict(built[table]["columns"])  # type: ignore[call-overload]
        # SQLite reports an INTEGER PRIMARY KEY as nullable; the key says otherwise.
        for key in shape["key"]:  # type: ignore[attr-defined]
            built_columns[key] = False
        assert built_columns == shape["columns"], table
        assert built[table]["key"] == shape["key"], table
    assert db.migrate() == db.migrate()  # again: nothing to do, the same version
