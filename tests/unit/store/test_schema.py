"""The schema is declared once: a database built by the migrations has exactly the tables,
columns, keys and nullability the SQLAlchemy tables declare (the code reads and writes by
those), and a migrated database migrates again to the same."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from paddockd.store.boxes import BoxRepository
from paddockd.store.db import MIGRATIONS, Database, metadata


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


@pytest.mark.parametrize("version", [v for v, _ in MIGRATIONS[:-1]])
def test_a_database_of_every_earlier_schema_upgrades_with_its_data(
    tmp_path: Path, version: int
) -> None:
    """A server installed at any earlier schema, with boxes, snapshots and tokens in it,
    upgrades to today's: the rows are there and read as today's code reads them."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        for v, statements in MIGRATIONS:
            if v > version:
                break
            for statement in statements:
                old.execute(statement)
            old.execute("INSERT INTO schema_migrations VALUES (?)", (v,))
        # As the first schema's code wrote them (every later column has a default).
        old.execute(
            "INSERT INTO boxes (id, name, type, image, state, desired, created_at, ttl, "
            "ttl_action, cpus, memory_mb, pids) VALUES ('0123456789ab', 'old-box', 'small', "
            "'paddock-box:latest', 'stopped', 'stopped', 1700000000, 3600, 'stop', 1.0, "
            "1024, 512)"
        )
        old.execute(
            "INSERT INTO snapshots (box_id, seq, image, label, kind, created_at) VALUES "
            "('0123456789ab', 1, 'sha256:abc', 'before', 'stop', 1700000001)"
        )
        old.execute(
            "INSERT INTO tokens (id, name, hash, created_at) VALUES ('t1', 'ci', 'h1', 1700000000)"
        )
    db = Database(f"sqlite:///{path}")
    assert db.migrate() == MIGRATIONS[-1][0]
    built = _shape(db.engine)
    declared = _declared()
    assert sorted(built) == sorted(declared)
    repo = BoxRepository(db)
    box = asyncio.run(repo.get("0123456789ab"))
    assert box is not None and box.name == "old-box" and box.state.value == "stopped"
    (snap,) = asyncio.run(repo.snapshots("0123456789ab"))
    assert snap.label == "before" and snap.disk is None
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM tokens")).scalars().all() == ["ci"]
    db.close()
