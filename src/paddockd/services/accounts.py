"""The owner's one-time setup, logins and web sessions.

Passwords are hashed with argon2id (argon2-cffi's defaults: 64 MiB, 3 passes), in a
worker thread: a hash takes ~0.2 s of CPU that must not stall the event loop. Failed
logins slow down per client address and per username alike, whether or not that user
exists, and every refusal reads the same.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..domain.accounts import SERVER, Holders, User, validate_password, validate_username
from ..domain.errors import InvalidRequest, TooManyAttempts, Unauthorized
from ..store.accounts import AccountRepository, UsernameTaken

SETUP_LINK_TTL = 24 * 3600.0
SESSION_IDLE = 12 * 3600.0
SESSION_MAX = 7 * 24 * 3600.0
FREE_FAILURES = 3  # then each failure doubles the wait: 2 s, 4 s ... up to MAX_WAIT
MAX_WAIT = 15 * 60.0
FORGET_AFTER = 3600.0

REFUSED = "wrong username or password"


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    blocked_until: float = 0.0


@dataclass
class Throttle:
    """Growing waits after repeated failures, per key (an address, a username). A flood
    of made-up usernames must not grow it without bound: past `limit` keys, those quiet
    for FORGET_AFTER go."""

    now: Callable[[], float] = time.monotonic
    limit: int = 10_000
    _seen: dict[str, _Failures] = field(default_factory=lambda: defaultdict(_Failures))

    def _clock(self) -> float:
        return float(self.now())

    def __len__(self) -> int:
        return len(self._seen)

    def wait(self, *keys: str) -> float:
        now = self._clock()
        left = (self._seen[k].blocked_until - now for k in keys if k in self._seen)
        return max([0.0, *left])

    def failed(self, *keys: str) -> None:
        now = self._clock()
        if len(self._seen) >= self.limit:
            quiet = [k for k, s in self._seen.items() if now - s.last > FORGET_AFTER]
            for key in quiet:
                del self._seen[key]
        for key in keys:
            seen = self._seen[key]
            if now - seen.last > FORGET_AFTER:
                seen.count = 0
            seen.count += 1
            seen.last = now
            if seen.count > FREE_FAILURES:
                seen.blocked_until = now + min(2.0 ** (seen.count - FREE_FAILURES), MAX_WAIT)

    def succeeded(self, *keys: str) -> None:
        for key in keys:
            self._seen.pop(key, None)


@dataclass(frozen=True)
class Session:
    user: User
    csrf: str


class AccountService:
    def __init__(self, repo: AccountRepository, throttle: Throttle | None = None) -> None:
        self._repo = repo
        self._hasher = PasswordHasher()
        self._throttle = throttle or Throttle()

    @functools.cached_property
    def _decoy(self) -> str:
        """Verified against when the username is unknown, so that costs what a real check
        costs and timing does not tell which usernames exist. Made on first use: the
        `paddockd setup-link` command and start-up need no ~0.2 s hash."""
        return self._hasher.hash("paddock-decoy-password")

    def new_setup_link(self, ttl: float = SETUP_LINK_TTL) -> str:
        return self._repo.new_setup_link_sync(ttl)

    async def owners(self) -> dict[str | None, str]:
        """Usernames by user id; None (rows from before accounts, server tokens' work) is
        the owner's."""
        users = await self._repo.users()
        names: dict[str | None, str] = {u.id: u.username for u, _ in users}
        names[None] = next((u.username for u, _ in users if u.is_owner), SERVER.username)
        return names

    async def holders(self) -> Holders:
        return Holders(frozenset(u.id for u, _ in await self._repo.users() if u.is_owner))

    async def named(self, username: str) -> User | None:
        return next((u for u, _ in await self._repo.users() if u.username == username), None)

    async def has_owner(self) -> bool:
        return await self._repo.has_owner()

    async def link_state(self, token: str, kind: str = "setup") -> str:
        return await self._repo.link_state(token, kind)

    async def create_owner(self, link: str, username: str, password: str, again: str) -> User:
        return await self.create_account("setup", link, username, password, again)

    async def create_account(
        self, kind: str, link: str, username: str, password: str, again: str
    ) -> User:
        """The account a setup ("setup") or invite ("invite") link is for; the link is
        spent only if the account is made."""
        name = validate_username(username)
        if password != again:
            raise InvalidRequest("the two passwords differ")
        validate_password(password, name)
        hashed = await anyio.to_thread.run_sync(self._hasher.hash, password)
        try:
            return await self._repo.add_user_with_link(link, kind, name, hashed)
        except LookupError:
            raise InvalidRequest(f"this {kind} link is no longer valid") from None
        except UsernameTaken:
            raise InvalidRequest(f"the username {name!r} is taken; choose another") from None

    async def login(self, address: str, username: str, password: str) -> tuple[User, str, str]:
        """(user, session cookie, CSRF token), or Unauthorized with the same words for a
        wrong name or a wrong password."""
        name = username.strip().lower()[:64]
        keys = (f"ip:{address}", f"user:{name}")
        wait = self._throttle.wait(*keys)
        if wait > 0:
            raise TooManyAttempts(
                f"too many failed logins; try again in {int(wait) + 1} s",
                details={"retry_after": int(wait) + 1},
            )
        found = await self._repo.credentials(name) if len(password) <= 1024 else None
        # The decoy is made (once) off the event loop too: hashing is the slow part.
        stored = found[1] if found else None
        ok = await anyio.to_thread.run_sync(
            lambda: self._check(stored or self._decoy, password[:1024])
        )
        if not ok or found is None:
            self._throttle.failed(*keys)
            raise Unauthorized(REFUSED)
        self._throttle.succeeded(*keys)
        if self._hasher.check_needs_rehash(found[1]):
            hashed = await anyio.to_thread.run_sync(self._hasher.hash, password)
            await self._repo.set_password(found[0].id, hashed)
        cookie, csrf = await self._repo.new_session(found[0].id)
        return found[0], cookie, csrf

    def _check(self, stored: str, password: str) -> bool:
        try:
            return self._hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return False

    async def session(self, cookie: str) -> Session | None:
        found = await self._repo.session(cookie, SESSION_IDLE, SESSION_MAX) if cookie else None
        return Session(*found) if found else None

    async def logout(self, cookie: str) -> None:
        await self._repo.end_session(cookie)

    async def change_password(
        self, user: User, cookie: str, current: str, new: str, again: str
    ) -> None:
        found = await self._repo.credentials(user.username)
        if found is None or not await anyio.to_thread.run_sync(self._check, found[1], current):
            raise Unauthorized("the current password is wrong")
        if new != again:
            raise InvalidRequest("the two new passwords differ")
        validate_password(new, user.username)
        await self._repo.set_password(
            user.id, await anyio.to_thread.run_sync(self._hasher.hash, new)
        )
        # Anyone who had the old password is logged out everywhere but here.
        await self._repo.end_sessions(user.id, keep=cookie)
