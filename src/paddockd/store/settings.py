"""The owner's changed settings (settings.py), each kept as JSON until it is reset."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .db import Database, settings


def _read(conn: Connection) -> dict[str, Any]:
    return {
        str(k): json.loads(str(v))
        for k, v in conn.execute(sa.select(settings.c.key, settings.c.value))
    }


class SettingsRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def load(self) -> dict[str, Any]:
        """Read at once: the composition root builds the server from these."""
        with self._db.engine.begin() as conn:
            return _read(conn)

    async def all(self) -> dict[str, Any]:
        return await self._db.run(_read)

    async def put(self, key: str, value: Any) -> None:
        row = {"key": key, "value": json.dumps(value), "updated_at": time.time()}

        def work(conn: Connection) -> None:
            conn.execute(settings.delete().where(settings.c.key == key))
            conn.execute(settings.insert().values(**row))

        await self._db.run(work)

    async def remove(self, key: str) -> None:
        await self._db.run(
            lambda conn: conn.execute(settings.delete().where(settings.c.key == key))
        )
