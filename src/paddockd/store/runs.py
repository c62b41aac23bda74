"""Agent run records, one row per `paddock prompt`."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.runs import Run
from .db import Database, runs

_COLUMNS = tuple(f.name for f in fields(Run))


def _run(row: Any) -> Run:
    return Run(**{name: getattr(row, name) for name in _COLUMNS})


class RunRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(self, run: Run) -> None:
        """Insert or replace the run's record, in one transaction."""

        def work(conn: Connection) -> None:
            conn.execute(runs.delete().where(runs.c.id == run.id))
            conn.execute(runs.insert().values(**asdict(run)))

        await self._db.run(work)

    async def get(self, run_id: str) -> Run | None:
        row = await self._db.run(
            lambda conn: conn.execute(sa.select(runs).where(runs.c.id == run_id)).first()
        )
        return _run(row) if row is not None else None

    async def for_box(self, box_id: str) -> list[Run]:
        rows = await self._db.run(
            lambda conn: conn.execute(
                sa.select(runs).where(runs.c.box_id == box_id).order_by(runs.c.started_at)
            ).all()
        )
        return [_run(row) for row in rows]

    async def all(self) -> list[Run]:
        rows = await self._db.run(lambda conn: conn.execute(sa.select(runs)).all())
        return [_run(row) for row in rows]

    async def delete(self, run_id: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(runs.delete().where(runs.c.id == run_id))

        await self._db.run(work)

    async def running(self) -> list[Run]:
        rows = await self._db.run(
            lambda conn: conn.execute(sa.select(runs).where(runs.c.status == "running")).all()
        )
        return [_run(row) for row in rows]

    async def add_missing(self, found: list[Run]) -> None:
        """Import records made elsewhere; a run already here keeps its row."""

        def work(conn: Connection) -> None:
            have = {r[0] for r in conn.execute(sa.select(runs.c.id))}
            for run in found:
                if run.id not in have:
                    conn.execute(runs.insert().values(**asdict(run)))

        await self._db.run(work)
