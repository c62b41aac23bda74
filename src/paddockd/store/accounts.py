"""Users, web sessions and one-time links. Secrets (session cookies, link tokens) are
stored only as SHA-256 digests: they are 256-bit random, so no dictionary applies."""

from __future__ import annotations

import hashlib
import secrets
import time

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.accounts import NO_LIMITS, Limits, Role, User
from .db import Database, links, sessions, users

_LIMIT_COLUMNS = (users.c.max_boxes, users.c.max_cpus, users.c.max_memory_mb)


def _user_named(conn: Connection, username: str) -> User | None:
    row = conn.execute(
        sa.select(users.c.id, users.c.username, users.c.role).where(users.c.username == username)
    ).first()
    return User(row[0], row[1], Role(row[2])) if row else None


class UsernameTaken(Exception):
    pass


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class AccountRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- users ------------------------------------------------------------------------
    def has_owner_sync(self) -> bool:
        with self._db.engine.begin() as conn:
            return _has_owner(conn)

    async def has_owner(self) -> bool:
        return await self._db.run(_has_owner)

    async def add_user_with_link(
        self, link: str, kind: str, username: str, password_hash: str
    ) -> User:
        """Spend a setup or invite link and create its account in one transaction: two
        browsers submitting the same link make one account. The setup link makes the
        owner (only while there is none); an invite, the role it was made for. LookupError
        if the link is not valid, UsernameTaken if the username is."""

        def work(conn: Connection) -> User:
            now = time.time()
            where = (
                links.c.hash == digest(link),
                links.c.kind == kind,
                links.c.used_at.is_(None),
                links.c.expires_at > now,
            )
            row = conn.execute(sa.select(links.c.role).where(*where)).first()
            spent = conn.execute(links.update().where(*where).values(used_at=now))
            if row is None or spent.rowcount != 1 or (kind == "setup" and _has_owner(conn)):
                raise LookupError("the link is not valid")
            taken = conn.execute(sa.select(users.c.id).where(users.c.username == username))
            if taken.first() is not None:
                raise UsernameTaken(username)
            role = Role.OWNER if kind == "setup" else Role(row[0] or Role.MEMBER.value)
            user = User(secrets.token_hex(8), username, role)
            conn.execute(
                users.insert().values(
                    id=user.id,
                    username=username,
                    password_hash=password_hash,
                    role=user.role.value,
                    created_at=now,
                )
            )
            return user

        return await self._db.run(work)

    async def credentials(self, username: str) -> tuple[User, str] | None:
        """The user and their password hash."""

        def work(conn: Connection) -> tuple[User, str] | None:
            row = conn.execute(
                sa.select(users.c.id, users.c.username, users.c.role, users.c.password_hash).where(
                    users.c.username == username
                )
            ).first()
            return (User(row[0], row[1], Role(row[2])), str(row[3])) if row else None

        return await self._db.run(work)

    async def set_password(self, user_id: str, password_hash: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                users.update().where(users.c.id == user_id).values(password_hash=password_hash)
            )

        await self._db.run(work)

    async def users(self) -> list[tuple[User, float]]:
        """Every user and when they joined, oldest first."""

        def work(conn: Connection) -> list[tuple[User, float]]:
            query = sa.select(users.c.id, users.c.username, users.c.role, users.c.created_at)
            return [
                (User(r[0], r[1], Role(r[2])), float(r[3]))
                for r in conn.execute(query.order_by(users.c.created_at))
            ]

        return await self._db.run(work)

    async def exists(self, user_id: str) -> bool:
        """Whether the account is still there (a removed member's is not)."""

        def work(conn: Connection) -> bool:
            query = sa.select(users.c.id).where(users.c.id == user_id)
            return conn.execute(query).first() is not None

        return await self._db.run(work)

    async def limits(self, user_id: str) -> Limits:
        """The limits the owner set this user (an owner has none)."""

        def work(conn: Connection) -> Limits:
            row = conn.execute(
                sa.select(users.c.role, *_LIMIT_COLUMNS).where(users.c.id == user_id)
            ).first()
            return NO_LIMITS if row is None or row[0] == Role.OWNER.value else Limits(*row[1:])

        return await self._db.run(work)

    async def all_limits(self) -> dict[str, Limits]:
        def work(conn: Connection) -> dict[str, Limits]:
            query = sa.select(users.c.id, *_LIMIT_COLUMNS)
            return {row[0]: Limits(*row[1:]) for row in conn.execute(query)}

        return await self._db.run(work)

    async def set_limits(self, username: str, limits: Limits) -> User | None:
        """Replace a user's limits; None if there is no such user."""

        def work(conn: Connection) -> User | None:
            user = _user_named(conn, username)
            if user is not None:
                conn.execute(
                    users.update()
                    .where(users.c.id == user.id)
                    .values(
                        max_boxes=limits.max_boxes,
                        max_cpus=limits.max_cpus,
                        max_memory_mb=limits.max_memory_mb,
                    )
                )
            return user

        return await self._db.run(work)

    async def remove_user(self, username: str) -> User | None:
        """Delete a user and every session of theirs; what they own stays."""

        def work(conn: Connection) -> User | None:
            user = _user_named(conn, username)
            if user is not None:
                conn.execute(sessions.delete().where(sessions.c.user_id == user.id))
                conn.execute(users.delete().where(users.c.id == user.id))
            return user

        return await self._db.run(work)

    # -- links ------------------------------------------------------------------------
    async def new_invite(self, role: Role, ttl: float) -> tuple[str, float]:
        """A one-time invitation for an account with `role`: (token, expiry)."""
        token = secrets.token_urlsafe(32)
        now = time.time()

        def work(conn: Connection) -> None:
            conn.execute(
                links.insert().values(
                    hash=digest(token),
                    kind="invite",
                    role=role.value,
                    created_at=now,
                    expires_at=now + ttl,
                )
            )

        await self._db.run(work)
        return token, now + ttl

    def new_setup_link_sync(self, ttl: float) -> str:
        """A new setup link; any earlier one unused is void from now on."""
        token = secrets.token_urlsafe(32)
        now = time.time()
        with self._db.engine.begin() as conn:
            conn.execute(links.delete().where(links.c.kind == "setup", links.c.used_at.is_(None)))
            conn.execute(
                links.insert().values(
                    hash=digest(token), kind="setup", created_at=now, expires_at=now + ttl
                )
            )
        return token

    async def link_state(self, token: str, kind: str = "setup") -> str:
        """ "valid", "used", "expired" or "unknown"."""

        def work(conn: Connection) -> str:
            row = conn.execute(
                sa.select(links.c.used_at, links.c.expires_at).where(
                    links.c.hash == digest(token), links.c.kind == kind
                )
            ).first()
            if row is None:
                return "unknown"
            if row[0] is not None:
                return "used"
            return "valid" if row[1] > time.time() else "expired"

        return await self._db.run(work)

    # -- sessions ---------------------------------------------------------------------
    async def new_session(self, user_id: str) -> tuple[str, str]:
        """(cookie value, CSRF token)."""
        cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)

        def work(conn: Connection) -> None:
            now = time.time()
            conn.execute(
                sessions.insert().values(
                    hash=digest(cookie), user_id=user_id, csrf=csrf, created_at=now, seen_at=now
                )
            )

        await self._db.run(work)
        return cookie, csrf

    async def session(self, cookie: str, idle: float, absolute: float) -> tuple[User, str] | None:
        """The session's user and CSRF token, if it is alive (and it is kept alive)."""

        def work(conn: Connection) -> tuple[User, str] | None:
            now = time.time()
            row = conn.execute(
                sa.select(
                    users.c.id,
                    users.c.username,
                    users.c.role,
                    sessions.c.csrf,
                    sessions.c.created_at,
                    sessions.c.seen_at,
                )
                .join(users, users.c.id == sessions.c.user_id)
                .where(sessions.c.hash == digest(cookie))
            ).first()
            if row is None:
                return None
            if now - row[5] > idle or now - row[4] > absolute:
                conn.execute(sessions.delete().where(sessions.c.hash == digest(cookie)))
                return None
            conn.execute(
                sessions.update().where(sessions.c.hash == digest(cookie)).values(seen_at=now)
            )
            return User(row[0], row[1], Role(row[2])), str(row[3])

        return await self._db.run(work)

    async def end_session(self, cookie: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(sessions.delete().where(sessions.c.hash == digest(cookie)))

        await self._db.run(work)

    async def end_sessions(self, user_id: str, keep: str | None = None) -> None:
        """Every session of a user but `keep` (after a password change)."""

        def work(conn: Connection) -> None:
            gone = sessions.delete().where(sessions.c.user_id == user_id)
            if keep is not None:
                gone = gone.where(sessions.c.hash != digest(keep))
            conn.execute(gone)

        await self._db.run(work)


def _has_owner(conn: Connection) -> bool:
    return (
        conn.execute(sa.select(users.c.id).where(users.c.role == Role.OWNER.value)).first()
        is not None
    )
