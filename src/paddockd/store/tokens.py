"""API tokens. Only a SHA-256 of each token is stored; the token is shown once."""

from __future__ import annotations

import hashlib
import secrets
import time

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .db import Database, tokens

PREFIX = "pdk_"


def _hash(token: str) -> str:
    # Tokens are 256-bit random strings, so a fast hash is enough (no dictionary to attack).
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        # digest -> when it was last checked against the database. Keeps a write off the
        # hot path of every request; a revoked token stops working within CACHE_SECONDS.
        self._recent: dict[str, float] = {}

    CACHE_SECONDS = 60.0

    def create_sync(self, name: str, user_id: str | None = None) -> str:
        """Mint a token (the `paddockd token create` admin command: no user, acts as the
        owner; a device login: the user who approved it)."""
        token = PREFIX + secrets.token_urlsafe(32)
        with self._db.engine.begin() as conn:
            conn.execute(
                tokens.insert().values(
                    id=secrets.token_hex(6),
                    name=name,
                    hash=_hash(token),
                    created_at=time.time(),
                    user_id=user_id,
                )
            )
        return token

    async def create(self, name: str, user_id: str | None = None) -> str:
        return await anyio.to_thread.run_sync(self.create_sync, name, user_id)

    async def verify(self, token: str) -> bool:
        digest = _hash(token)
        now = time.monotonic()
        checked = self._recent.get(digest)
        if checked is not None and now - checked < self.CACHE_SECONDS:
            return True

        def work(conn: Connection) -> bool:
            row = conn.execute(sa.select(tokens.c.id).where(tokens.c.hash == digest)).first()
            if row is None:
                return False
            conn.execute(
                tokens.update().where(tokens.c.id == row[0]).values(last_used_at=time.time())
            )
            return True

        ok = await self._db.run(work)
        if ok:
            self._recent[digest] = now
        return ok
