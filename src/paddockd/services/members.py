"""The owner's administration of people, and everyone's API tokens.

Members join by a one-time invitation link (7 days) and see only their own boxes, drives
and provider keys. Removing one ends their sessions, revokes their tokens, forgets their
provider keys (secrets of a person no longer here, whom no one else may manage) and stops
their boxes, which stay with their drives (the owner deletes them, or not)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..domain.accounts import NO_LIMITS, Limits, Role, TokenInfo, User
from ..domain.box import BoxState
from ..domain.errors import Forbidden, InvalidRequest, NotFound, PaddockError
from ..store.accounts import AccountRepository
from ..store.tokens import SCOPES, TokenRepository
from .boxes import BoxService
from .credentials import CredentialService
from .previews import PreviewService
from .secrets import SecretService
from .templates import TemplateService
from .webhooks import WebhookService

log = logging.getLogger(__name__)

INVITE_TTL = 7 * 24 * 3600.0
MAX_TOKEN_NAME = 128
# An expiring token lives a minute at least (less is a typo) and ten years at most.
TOKEN_LIFETIME = (60, 3650 * 86400)


@dataclass(frozen=True)
class Member:
    user: User
    joined: float
    boxes: int
    limits: Limits = NO_LIMITS


@dataclass(frozen=True)
class Removed:
    user: User
    tokens: int
    stopped: list[str]


class TokenService:
    """A user's own API tokens (the owner: everyone's). Tokens made on the server have no
    user and are the owner's."""

    def __init__(self, tokens: TokenRepository) -> None:
        self._tokens = tokens

    async def listed(self, caller: User) -> list[TokenInfo]:
        return await self._tokens.listed(caller.stored_id, everyone=caller.is_owner)

    async def create(
        self, caller: User, name: str, expires_in: int | None = None, scope: str | None = None
    ) -> tuple[str, TokenInfo]:
        """A new token of the caller's, valid `expires_in` seconds (None: until revoked);
        `scope` "metrics": one that reads /metrics and nothing else (the owner's)."""
        if scope is not None and scope not in SCOPES:
            raise InvalidRequest(f"a token's scope is {', '.join(SCOPES)} (omit it: the API)")
        if scope == "metrics" and not caller.is_owner:
            raise Forbidden("the metrics are the server owner's: so are their tokens")
        name = name.strip()
        if not name or len(name) > MAX_TOKEN_NAME or not name.isprintable():
            raise InvalidRequest(f"a token's name is 1-{MAX_TOKEN_NAME} printable characters")
        expires_at = None
        if expires_in is not None:
            low, high = TOKEN_LIFETIME
            if not low <= expires_in <= high:
                raise InvalidRequest(
                    f"a token expires in {low} s to {high // 86400} days (omit it: never)"
                )
            expires_at = time.time() + expires_in
        token = await self._tokens.create(name, caller.stored_id, expires_at, scope)
        mine = await self._tokens.listed(caller.stored_id)
        return token, mine[-1]

    async def revoke(self, caller: User, token_id: str) -> None:
        if not await self._tokens.revoke(token_id, caller.stored_id, everyone=caller.is_owner):
            raise NotFound(f"no token {token_id!r} (see `paddock token ls`)")


class MemberService:
    def __init__(
        self,
        accounts: AccountRepository,
        tokens: TokenRepository,
        boxes: BoxService,
        credentials: CredentialService,
        public_url: Callable[[], str],
        previews: PreviewService | None = None,
        secrets: SecretService | None = None,
        templates: TemplateService | None = None,
        webhooks: WebhookService | None = None,
    ) -> None:
        self._previews = previews
        self._webhooks = webhooks
        self._secrets = secrets
        self._templates = templates
        self._accounts = accounts
        self._tokens = tokens
        self._boxes = boxes
        self._credentials = credentials
        self._public_url = public_url

    async def invite(self, role: str = Role.MEMBER.value) -> tuple[str, Role, float]:
        """(the link, the role it gives, when it expires)."""
        try:
            wanted = Role(role)
        except ValueError:
            raise InvalidRequest(f"unknown role {role!r}: member or owner") from None
        token, expires = await self._accounts.new_invite(wanted, INVITE_TTL)
        return f"{self._public_url().rstrip('/')}/invite/{token}", wanted, expires

    async def listed(self) -> list[Member]:
        boxes = await self._boxes.listed()
        limits = await self._accounts.all_limits()
        return [
            Member(
                user,
                joined,
                sum(1 for b in boxes if b.owner_id == user.id),
                limits.get(user.id, NO_LIMITS),
            )
            for user, joined in await self._accounts.users()
        ]

    async def set_limits(self, username: str, limits: Limits) -> Member:
        """Replace a member's limits (each None: none). Boxes already running keep running;
        the limits apply to the next `new` or `resume`."""
        name = username.strip().lower()
        found = next((m for m in await self.listed() if m.user.username == name), None)
        if found is None:
            raise NotFound(f"no user {username!r} (see `paddock members ls`)")
        if found.user.is_owner:
            raise InvalidRequest(f"{found.user.username} is an owner: owners have no limits")
        await self._accounts.set_limits(name, limits)
        return Member(found.user, found.joined, found.boxes, limits)

    async def remove(self, caller: User, username: str) -> Removed:
        if username.strip().lower() == caller.username and caller.id:
            raise InvalidRequest("you cannot remove yourself")
        user = await self._accounts.remove_user(username.strip().lower())
        if user is None:
            raise NotFound(f"no user {username!r} (see `paddock members ls`)")
        # Locked out first (sessions went with the user; tokens now), then their boxes stop.
        revoked = await self._tokens.revoke_all(user.id)
        forgotten = await self._credentials.forget(user.id)
        if self._secrets is not None:
            forgotten += await self._secrets.forget(user.id)
        if self._templates is not None:
            await self._templates.forget_owner(user.id)
        # Their previews go with them: a public one would otherwise wake their box for
        # anyone who has the link, boot hooks and all.
        if self._previews is not None:
            await self._previews.drop_owner(user.id)
        if self._webhooks is not None:
            await self._webhooks.drop_owner(user.id)
        stopped = []
        for box in await self._boxes.all():
            if box.owner_id == user.id and box.state in (BoxState.RUNNING, BoxState.CREATING):
                # One box that cannot stop now must not keep the others running.
                with contextlib.suppress(PaddockError):
                    await self._boxes.stop(box.id)
                    stopped.append(box.name)
        log.info(
            "removed user %s: %d token(s) revoked, %d provider key(s) forgotten, stopped %s",
            user.username,
            revoked,
            forgotten,
            stopped,
        )
        return Removed(user, revoked, stopped)
