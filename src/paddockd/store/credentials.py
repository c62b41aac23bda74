"""Provider credentials, encrypted at rest (Fernet: AES-128-CBC + HMAC-SHA256) with a key
file only paddockd can read, and which boxes each one is attached to."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy.engine import Connection

from ..domain.credentials import KeyMode, check_mode
from ..domain.errors import PaddockError
from .db import Database, box_credentials, credentials


@dataclass(frozen=True)
class StoredCredential:
    provider: str
    base_url: str | None
    created_at: float
    last_used_at: float | None
    mode: KeyMode = "gateway"


@dataclass(frozen=True)
class Key:
    """A provider key as the box's environment or the gateway needs it."""

    secret: str
    base_url: str | None
    mode: KeyMode


def load_key(path: Path) -> bytes:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(Fernet.generate_key())
    return path.read_bytes().strip()


def _whose(holder: str | None) -> sa.ColumnElement[bool]:
    return whose(credentials.c.user_id, holder)


class Sealer:
    """Encrypts what is stored at rest with the key file's key."""

    def __init__(self, key_file: Path) -> None:
        self._fernet = Fernet(load_key(key_file))

    def seal(self, text: str) -> bytes:
        return self._fernet.encrypt(text.encode())

    def open(self, sealed: bytes) -> str:
        try:
            return self._fernet.decrypt(sealed).decode()
        except InvalidToken:
            raise PaddockError(
                "a stored credential cannot be decrypted: was credentials.key replaced? "
                "Set it again with `paddock auth set` (or `paddock secret set`)"
            ) from None


def whose(column: sa.Column[str], holder: str | None) -> sa.ColumnElement[bool]:
    # The owner's keys are stored under '': SQLite lets NULLs repeat in a primary key.
    return column == (holder or "")


class CredentialRepository:
    """Each holder's keys (see `Holders`): a member's id, or None for the owner's."""

    def __init__(self, db: Database, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    async def put(
        self,
        holder: str | None,
        provider: str,
        secret: str,
        base_url: str | None,
        mode: KeyMode = "gateway",
    ) -> None:
        sealed = self._sealer.seal(secret)
        values = {"secret": sealed, "base_url": base_url, "created_at": time.time(), "mode": mode}

        def work(conn: Connection) -> None:
            mine = _whose(holder) & (credentials.c.provider == provider)
            conn.execute(credentials.delete().where(mine))
            conn.execute(
                credentials.insert().values(user_id=holder or "", provider=provider, **values)
            )

        await self._db.run(work)

    async def delete(
        self, holder: str | None, box_ids: list[str], provider: str | None = None
    ) -> int:
        """Forget the holder's key for `provider` (None: every one of theirs) and detach it
        from `box_ids`, their boxes; how many keys went."""

        def work(conn: Connection) -> int:
            mine: list[sa.ColumnElement[bool]] = [_whose(holder)]
            attached: list[sa.ColumnElement[bool]] = [box_credentials.c.box_id.in_(box_ids)]
            if provider is not None:
                mine.append(credentials.c.provider == provider)
                attached.append(box_credentials.c.provider == provider)
            conn.execute(box_credentials.delete().where(*attached))
            return int(conn.execute(credentials.delete().where(*mine)).rowcount)

        return await self._db.run(work)

    async def all(self, holder: str | None) -> list[StoredCredential]:
        def work(conn: Connection) -> list[StoredCredential]:
            rows = conn.execute(
                sa.select(
                    credentials.c.provider,
                    credentials.c.base_url,
                    credentials.c.created_at,
                    credentials.c.last_used_at,
                    credentials.c.mode,
                ).where(_whose(holder))
            )
            return [StoredCredential(*row) for row in rows]

        return await self._db.run(work)

    async def keys(
        self, holder: str | None, providers: list[str], used: bool = True
    ) -> dict[str, Key]:
        """provider -> its key, for the holder's keys that are set; marks them `used` (the
        gateway marks its uses in its own writes)."""

        def work(conn: Connection) -> dict[str, Key]:
            wanted = _whose(holder) & credentials.c.provider.in_(providers)
            rows = conn.execute(
                sa.select(
                    credentials.c.provider,
                    credentials.c.secret,
                    credentials.c.base_url,
                    credentials.c.mode,
                ).where(wanted)
            ).all()
            if rows and used:
                conn.execute(credentials.update().where(wanted).values(last_used_at=time.time()))
            return {r[0]: Key(self._sealer.open(r[1]), r[2], check_mode(r[3])) for r in rows}

        return await self._db.run(work)

    async def attach(self, box_id: str, provider: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                box_credentials.delete().where(
                    (box_credentials.c.box_id == box_id) & (box_credentials.c.provider == provider)
                )
            )
            conn.execute(box_credentials.insert().values(box_id=box_id, provider=provider))

        await self._db.run(work)

    async def detach(self, box_id: str, provider: str | None = None) -> None:
        def work(conn: Connection) -> None:
            where = box_credentials.c.box_id == box_id
            if provider is not None:
                where = where & (box_credentials.c.provider == provider)
            conn.execute(box_credentials.delete().where(where))

        await self._db.run(work)

    async def attached(self, box_id: str) -> list[str]:
        def work(conn: Connection) -> list[str]:
            rows = conn.execute(
                sa.select(box_credentials.c.provider).where(box_credentials.c.box_id == box_id)
            )
            return sorted(r[0] for r in rows)

        return await self._db.run(work)
