"""Device-login grants: pending until a logged-in person approves or denies the user
code, then consumed once by the device's poll. Only a digest of the device code is kept."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .accounts import digest
from .db import Database, device_grants


@dataclass(frozen=True)
class Grant:
    user_code: str
    client: str
    address: str
    created_at: float
    expires_at: float
    status: str  # pending, approved, denied, consumed
    user_id: str | None

    def live(self, now: float) -> bool:
        return self.status in ("pending", "approved") and now < self.expires_at


def _grant(row: Any) -> Grant:
    return Grant(*row)


_COLUMNS = (
    device_grants.c.user_code,
    device_grants.c.client,
    device_grants.c.address,
    device_grants.c.created_at,
    device_grants.c.expires_at,
    device_grants.c.status,
    device_grants.c.user_id,
)


class DeviceRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self, device_code: str, user_code: str, client: str, address: str, ttl: float
    ) -> None:
        def work(conn: Connection) -> None:
            now = time.time()
            # Old grants are of no use to anyone: keep the table small.
            conn.execute(device_grants.delete().where(device_grants.c.expires_at < now - 3600))
            conn.execute(
                device_grants.insert().values(
                    hash=digest(device_code),
                    user_code=user_code,
                    client=client,
                    address=address,
                    created_at=now,
                    expires_at=now + ttl,
                    status="pending",
                )
            )

        await self._db.run(work)

    async def waiting(self, address: str) -> int:
        """How many unexpired grants from `address` wait for a decision."""

        def work(conn: Connection) -> int:
            count = conn.execute(
                sa.select(sa.func.count())
                .select_from(device_grants)
                .where(
                    device_grants.c.address == address,
                    device_grants.c.status == "pending",
                    device_grants.c.expires_at > time.time(),
                )
            ).scalar_one()
            return int(count)

        return await self._db.run(work)

    async def by_user_code(self, user_code: str) -> Grant | None:
        def work(conn: Connection) -> Grant | None:
            row = conn.execute(
                sa.select(*_COLUMNS).where(device_grants.c.user_code == user_code)
            ).first()
            return _grant(row) if row else None

        return await self._db.run(work)

    async def decide(self, user_code: str, status: str, user_id: str) -> bool:
        """Approve or deny a pending, unexpired grant; False if it is not one."""

        def work(conn: Connection) -> bool:
            done = conn.execute(
                device_grants.update()
                .where(
                    device_grants.c.user_code == user_code,
                    device_grants.c.status == "pending",
                    device_grants.c.expires_at > time.time(),
                )
                .values(status=status, user_id=user_id)
            )
            return done.rowcount == 1

        return await self._db.run(work)

    async def take(self, device_code: str) -> Grant | None:
        """The grant as it is; an approved one is consumed by this read (once only)."""

        def work(conn: Connection) -> Grant | None:
            key = device_grants.c.hash == digest(device_code)
            row = conn.execute(sa.select(*_COLUMNS).where(key)).first()
            if row is None:
                return None
            grant = _grant(row)
            if grant.status == "approved" and grant.live(time.time()):
                taken = conn.execute(
                    device_grants.update()
                    .where(key, device_grants.c.status == "approved")
                    .values(status="consumed")
                )
                if taken.rowcount != 1:
                    return None
            return grant

        return await self._db.run(work)
