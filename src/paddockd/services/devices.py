"""`paddock login https://HOST` from another machine, as `gh auth login` does it: the CLI
gets a device code and a short user code, a person logged in on the web approves the
user code, and the CLI's next poll receives an API token for that person, once."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..domain.accounts import User
from ..domain.errors import InvalidRequest, NotFound, TooManyAttempts
from ..store.devices import DeviceRepository, Grant
from ..store.tokens import TokenRepository

TTL = 600  # seconds to approve
INTERVAL = 2  # seconds between polls
MAX_WAITING = 10  # per client address
# No vowels (no words), no look-alikes (0/O, 1/I): 20^8, about 2.6e10 codes.
_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"


@dataclass(frozen=True)
class Started:
    device_code: str
    user_code: str  # as shown: XXXX-XXXX


def normalize(user_code: str) -> str:
    code = "".join(c for c in user_code.upper() if c.isalnum())
    if len(code) != 8 or any(c not in _ALPHABET for c in code):
        raise InvalidRequest("a device code is 8 letters like BCDF-GHJK")
    return f"{code[:4]}-{code[4:]}"


class DeviceService:
    def __init__(
        self, repo: DeviceRepository, tokens: TokenRepository, public_url: Callable[[], str]
    ) -> None:
        self._repo = repo
        self._tokens = tokens
        self.public_url = public_url

    async def start(self, client: str, address: str) -> Started:
        # The call needs no token: one address may not fill the table.
        if await self._repo.waiting(address[:64]) >= MAX_WAITING:
            raise TooManyAttempts(
                f"{MAX_WAITING} device logins from this address already wait for approval; "
                "finish one or wait for them to expire",
                details={"retry_after": TTL},
            )
        client = " ".join(client.split())[:128] or "paddock CLI"
        user_code = normalize("".join(secrets.choice(_ALPHABET) for _ in range(8)))
        device_code = secrets.token_urlsafe(32)
        await self._repo.add(device_code, user_code, client, address[:64], TTL)
        return Started(device_code, user_code)

    async def poll(self, device_code: str) -> tuple[str, str | None]:
        grant = await self._repo.take(device_code)
        if grant is None or grant.status == "consumed":
            raise NotFound("no such device login (it was used already, or never started)")
        if grant.status == "denied":
            return "denied", None
        if not grant.live(time.time()):
            return "expired", None
        if grant.status == "pending":
            return "pending", None
        token = await self._tokens.create(f"{grant.client} (device login)", grant.user_id)
        return "approved", token

    async def pending(self, user_code: str) -> Grant:
        grant = await self._repo.by_user_code(normalize(user_code))
        if grant is None or not grant.live(time.time()) or grant.status != "pending":
            raise NotFound("no device is waiting for this code (mistyped, used or expired)")
        return grant

    async def decide(self, user: User, user_code: str, approve: bool) -> None:
        status = "approved" if approve else "denied"
        if not await self._repo.decide(normalize(user_code), status, user.id):
            raise NotFound("no device is waiting for this code (mistyped, used or expired)")
