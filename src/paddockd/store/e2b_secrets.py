"""E2B's secrets: each holder's own, by name, sealed at rest as provider keys are. A value
is written, replaced (a new version) or destroyed, never read back by any API; only the
credential gateway opens it, for a header of a sandbox's network rules."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .credentials import Sealer, whose
from .db import Database, e2b_secrets


@dataclass(frozen=True)
class E2BSecret:
    secret_id: str
    name: str
    version: int
    metadata: dict[str, str]
    created_at: float
    updated_at: float


_SHOWN = (
    e2b_secrets.c.id,
    e2b_secrets.c.name,
    e2b_secrets.c.version,
    e2b_secrets.c.metadata,
    e2b_secrets.c.created_at,
    e2b_secrets.c.updated_at,
)


def _secret(r: Sequence[Any]) -> E2BSecret:
    return E2BSecret(str(r[0]), str(r[1]), int(r[2]), json.loads(r[3]), r[4], r[5])


def _ref(holder: str | None, ref: str) -> sa.ColumnElement[bool]:
    """A secret of the holder's, by id or by name."""
    return whose(e2b_secrets.c.user_id, holder) & (
        (e2b_secrets.c.id == ref) | (e2b_secrets.c.name == ref)
    )


class E2BSecretRepository:
    def __init__(self, db: Database, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    async def create(
        self, holder: str | None, name: str, value: str, metadata: dict[str, str]
    ) -> E2BSecret | None:
        """A new secret at version 1; None if the holder has one of that name already."""
        sealed = self._sealer.seal(value)
        now = time.time()

        def work(conn: Connection) -> E2BSecret | None:
            taken = whose(e2b_secrets.c.user_id, holder) & (e2b_secrets.c.name == name)
            if conn.execute(sa.select(e2b_secrets.c.id).where(taken)).first() is not None:
                return None
            secret_id = uuid.uuid4().hex
            conn.execute(  # two at once with one name: the unique key refuses the second
                e2b_secrets.insert().values(
                    id=secret_id,
                    user_id=holder or "",
                    name=name,
                    value=sealed,
                    version=1,
                    metadata=json.dumps(metadata),
                    created_at=now,
                    updated_at=now,
                )
            )
            return E2BSecret(secret_id, name, 1, metadata, now, now)

        return await self._db.run(work)

    async def update(
        self, holder: str | None, ref: str, value: str, metadata: dict[str, str] | None
    ) -> E2BSecret | None:
        """The next version of the holder's secret `ref` (metadata kept unless given)."""
        sealed = self._sealer.seal(value)

        def work(conn: Connection) -> E2BSecret | None:
            fields: dict[str, Any] = {
                "value": sealed,
                "version": e2b_secrets.c.version + 1,
                "updated_at": time.time(),
            }
            if metadata is not None:
                fields["metadata"] = json.dumps(metadata)
            conn.execute(e2b_secrets.update().where(_ref(holder, ref)).values(**fields))
            row = conn.execute(sa.select(*_SHOWN).where(_ref(holder, ref))).first()
            return None if row is None else _secret(row)

        return await self._db.run(work)

    async def get(self, holder: str | None, ref: str) -> E2BSecret | None:
        def work(conn: Connection) -> E2BSecret | None:
            row = conn.execute(sa.select(*_SHOWN).where(_ref(holder, ref))).first()
            return None if row is None else _secret(row)

        return await self._db.run(work)

    async def all(self, holder: str | None) -> list[E2BSecret]:
        """The holder's secrets, oldest first."""

        def work(conn: Connection) -> list[E2BSecret]:
            rows = conn.execute(
                sa.select(*_SHOWN)
                .where(whose(e2b_secrets.c.user_id, holder))
                .order_by(e2b_secrets.c.created_at, e2b_secrets.c.id)
            ).all()
            return [_secret(r) for r in rows]

        return await self._db.run(work)

    async def delete(self, holder: str | None, ref: str | None) -> int:
        """Destroy the holder's secret `ref` (None: all of theirs); how many went."""

        def work(conn: Connection) -> int:
            mine = _ref(holder, ref) if ref is not None else whose(e2b_secrets.c.user_id, holder)
            return int(conn.execute(e2b_secrets.delete().where(mine)).rowcount)

        return await self._db.run(work)

    async def values(self, holder: str | None, names: list[str]) -> dict[str, str]:
        """name -> the real value, for the holder's secrets among `names`."""

        def work(conn: Connection) -> dict[str, str]:
            wanted = whose(e2b_secrets.c.user_id, holder) & e2b_secrets.c.name.in_(names)
            rows = conn.execute(
                sa.select(e2b_secrets.c.name, e2b_secrets.c.value).where(wanted)
            ).all()
            return {r[0]: self._sealer.open(r[1]) for r in rows}

        return await self._db.run(work)
