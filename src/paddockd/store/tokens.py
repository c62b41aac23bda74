"""API tokens. Only a SHA-256 of each token is stored; the token is shown once."""

from __future__ import annotations

import hashlib
import secrets
import time

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.accounts import SERVER, Role, TokenInfo, User
from .db import Database, tokens, users

PREFIX = "pdk_"
SCOPES = ("metrics",)  # a token with one reads only that (None: the API as its user)


def _expired(expires_at: float | None) -> bool:
    return expires_at is not None and expires_at <= time.time()


def _hash(token: str) -> str:
    # Tokens are 256-bit random strings, so a fast hash is enough (no dictionary to attack).
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        # digest -> (when it was last checked against the database, whose it is, when it
        # expires, its scope). Keeps a write off the hot path of every request; revoking
        # drops the entry, so a revoke (paddockd is one process) takes effect at once.
        self._recent: dict[str, tuple[float, User, float | None, str | None]] = {}

    CACHE_SECONDS = 60.0

    def create_sync(
        self,
        name: str,
        user_id: str | None = None,
        expires_at: float | None = None,
        scope: str | None = None,
    ) -> str:
        """Mint a token (the `paddockd token create` admin command: no user, acts as the
        owner; a device login or `paddock token create`: that user's), valid until
        `expires_at` (None: until revoked)."""
        token = PREFIX + secrets.token_urlsafe(32)
        with self._db.engine.begin() as conn:
            conn.execute(
                tokens.insert().values(
                    id=secrets.token_hex(6),
                    name=name,
                    hash=_hash(token),
                    created_at=time.time(),
                    user_id=user_id,
                    expires_at=expires_at,
                    scope=scope,
                )
            )
        return token

    async def create(
        self,
        name: str,
        user_id: str | None = None,
        expires_at: float | None = None,
        scope: str | None = None,
    ) -> str:
        return await anyio.to_thread.run_sync(self.create_sync, name, user_id, expires_at, scope)

    async def verify(self, token: str, scope: str | None = None) -> User | None:
        """Whose the token is, or None if it is not (or no longer) valid. A token with no
        user acts as the owner; one whose user was removed is not valid. A scoped token
        (a scraper's) is valid only where its scope is asked for: everywhere else it is
        no token at all."""
        digest = _hash(token)
        now = time.monotonic()
        cached = self._recent.get(digest)
        if cached is not None and now - cached[0] < self.CACHE_SECONDS:
            if _expired(cached[2]):
                self._recent.pop(digest, None)
                return None
            return cached[1] if cached[3] in (None, scope) else None
        found_scope: list[str | None] = [None]
        expiry: list[float | None] = [None]

        def work(conn: Connection) -> User | None:
            row = conn.execute(
                sa.select(tokens.c.id, tokens.c.user_id, tokens.c.expires_at, tokens.c.scope).where(
                    tokens.c.hash == digest
                )
            ).first()
            if row is None or _expired(row[2]):
                return None
            expiry[0], found_scope[0] = row[2], row[3]
            user_id = row[1]
            wanted = users.c.id == user_id if user_id else users.c.role == Role.OWNER.value
            found = conn.execute(
                sa.select(users.c.id, users.c.username, users.c.role).where(wanted)
            ).first()
            if found is None and user_id:
                return None
            conn.execute(
                tokens.update().where(tokens.c.id == row[0]).values(last_used_at=time.time())
            )
            return User(found[0], found[1], Role(found[2])) if found else SERVER

        user = await self._db.run(work)
        if user is None:
            self._recent.pop(digest, None)
            return None
        self._recent[digest] = (now, user, expiry[0], found_scope[0])
        return user if found_scope[0] in (None, scope) else None

    async def listed(self, user_id: str | None, everyone: bool = False) -> list[TokenInfo]:
        """A user's tokens (None: those made on the server), or everyone's."""

        def work(conn: Connection) -> list[TokenInfo]:
            query = sa.select(
                tokens.c.id,
                tokens.c.name,
                tokens.c.created_at,
                tokens.c.last_used_at,
                tokens.c.user_id,
                tokens.c.expires_at,
                tokens.c.scope,
            ).order_by(tokens.c.created_at)
            if not everyone:
                query = query.where(
                    tokens.c.user_id == user_id if user_id else tokens.c.user_id.is_(None)
                )
            return [TokenInfo(*row) for row in conn.execute(query)]

        return await self._db.run(work)

    async def revoke(self, token_id: str, user_id: str | None, everyone: bool = False) -> bool:
        """Delete one token (of `user_id` unless `everyone`); False if there is none."""

        def work(conn: Connection) -> list[str]:
            query = tokens.delete().where(tokens.c.id == token_id)
            if not everyone:
                query = query.where(
                    tokens.c.user_id == user_id if user_id else tokens.c.user_id.is_(None)
                )
            return [row[0] for row in conn.execute(query.returning(tokens.c.hash))]

        gone = await self._db.run(work)
        self._forget(gone)
        return bool(gone)

    async def revoke_all(self, user_id: str) -> int:
        def work(conn: Connection) -> list[str]:
            query = tokens.delete().where(tokens.c.user_id == user_id).returning(tokens.c.hash)
            return [row[0] for row in conn.execute(query)]

        gone = await self._db.run(work)
        self._forget(gone)
        return len(gone)

    def _forget(self, digests: list[str]) -> None:
        for digest in digests:
            self._recent.pop(digest, None)
