"""Each user's SSH public keys, and each box's host key pair (which goes with its box)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.errors import Conflict, NotFound
from ..domain.ssh import PublicKey, parse_public_key
from .credentials import whose
from .db import Database, box_ssh, ssh_keys


@dataclass(frozen=True)
class StoredKey:
    name: str
    key: PublicKey
    created_at: float


class SshRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def keys(self, holder: str | None) -> list[StoredKey]:
        where = whose(ssh_keys.c.user_id, holder)
        rows = await self._db.run(
            lambda conn: conn.execute(
                sa.select(ssh_keys).where(where).order_by(ssh_keys.c.name)
            ).all()
        )
        return [StoredKey(r.name, parse_public_key(r.public_key), r.created_at) for r in rows]

    async def add(self, holder: str | None, name: str, key: PublicKey, most: int) -> StoredKey:
        made = StoredKey(name, key, time.time())

        def work(conn: Connection) -> None:
            mine = conn.execute(
                sa.select(ssh_keys.c.name, ssh_keys.c.fingerprint).where(
                    whose(ssh_keys.c.user_id, holder)
                )
            ).all()
            for other, fingerprint in mine:
                if other == name:
                    raise Conflict(f"you have a key named {name!r} already (remove it first)")
                if fingerprint == key.fingerprint:
                    raise Conflict(f"this key is registered already, as {other!r}")
            if len(mine) >= most:
                raise Conflict(f"you have {most} keys, the most one may: remove one first")
            conn.execute(
                ssh_keys.insert().values(
                    user_id=holder or "",
                    name=name,
                    public_key=key.line,
                    fingerprint=key.fingerprint,
                    created_at=made.created_at,
                )
            )

        await self._db.run(work)
        return made

    async def delete(self, holder: str | None, name: str) -> None:
        where = sa.and_(whose(ssh_keys.c.user_id, holder), ssh_keys.c.name == name)
        gone = await self._db.run(lambda conn: conn.execute(ssh_keys.delete().where(where)))
        if not gone.rowcount:
            raise NotFound(f"you have no SSH key named {name!r} (see `paddock ssh-key ls`)")

    async def host_key(self, box_id: str) -> tuple[str, str] | None:
        """The box's host key: (private, public), both in OpenSSH's format."""
        where = box_ssh.c.box_id == box_id
        row = await self._db.run(lambda conn: conn.execute(sa.select(box_ssh).where(where)).first())
        return (row.host_key, row.public_key) if row else None

    async def keep_host_key(self, box_id: str, private: str, public: str) -> tuple[str, str]:
        """Keep this pair unless the box has one already (two first sessions at once):
        the one kept, either way."""

        def work(conn: Connection) -> tuple[str, str]:
            found = conn.execute(sa.select(box_ssh).where(box_ssh.c.box_id == box_id)).first()
            if found:
                return found.host_key, found.public_key
            conn.execute(
                box_ssh.insert().values(box_id=box_id, host_key=private, public_key=public)
            )
            return private, public

        return await self._db.run(work)
