"""E2B's Secrets API over the holder's own E2B secrets, and what the credential gateway
reads of them (services/gateway.py `HeaderSecrets`): each sandbox's network rules, and the
current values of the secrets those rules name. A value is never returned, and never
enters a box: the gateway sets the headers on the way out."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from ...domain.accounts import Holders, User, holder_of
from ...domain.box import Box
from ...domain.errors import Conflict, InvalidRequest, NotFound
from ...domain.header_rules import HeaderRule, check_metadata, check_secret_name
from ...domain.secrets import check_value
from ...store.e2b_secrets import E2BSecret, E2BSecretRepository
from ...store.sandboxes import SandboxRepository
from .listing import decode_token, encode_token

MAX_LIMIT = 100
MAX_SECRETS = 1000  # each user's
_ID_RE = re.compile(r"^[0-9a-f]{32}$")


class E2BSecrets:
    def __init__(
        self,
        repo: E2BSecretRepository,
        sandboxes: SandboxRepository,
        holders: Callable[[], Awaitable[Holders]],
    ) -> None:
        self._repo = repo
        self._sandboxes = sandboxes
        self._holders = holders

    async def holder_of(self, box: Box) -> str | None:
        """Whose secrets a box's rules use: its owner's, as the gateway tells them apart."""
        return (await self._holders()).of(box.owner_id)

    async def create(
        self, caller: User, name: str, value: str, metadata: dict[str, str] | None
    ) -> E2BSecret:
        if len(await self._repo.all(holder_of(caller))) >= MAX_SECRETS:
            raise InvalidRequest(f"at most {MAX_SECRETS} secrets each: destroy some first")
        made = await self._repo.create(
            holder_of(caller), check_secret_name(name), check_value(value), check_metadata(metadata)
        )
        if made is None:
            raise Conflict(f"a secret named {name!r} exists: update it, or destroy it first")
        return made

    async def update(
        self, caller: User, ref: str, value: str, metadata: dict[str, str] | None
    ) -> E2BSecret:
        meta = check_metadata(metadata) if metadata is not None else None
        found = await self._repo.update(holder_of(caller), ref, check_value(value), meta)
        if found is None:
            raise NotFound(f"no secret {ref!r}")
        return found

    async def get(self, caller: User, ref: str) -> E2BSecret:
        found = await self._repo.get(holder_of(caller), ref)
        if found is None:
            raise NotFound(f"no secret {ref!r}")
        return found

    async def listed(
        self, caller: User, limit: int, next_token: str | None
    ) -> tuple[list[E2BSecret], str | None]:
        """A page of the caller's secrets, oldest first, and the next page's token."""
        found = await self._repo.all(holder_of(caller))
        if next_token:
            after = decode_token(next_token, lambda ref: bool(_ID_RE.match(ref)))
            found = [s for s in found if (s.created_at, s.secret_id) > after]
        if len(found) <= limit:
            return found, None
        shown = found[:limit]
        return shown, encode_token((shown[-1].created_at, shown[-1].secret_id))

    async def delete(self, caller: User, ref: str) -> None:
        if not await self._repo.delete(holder_of(caller), ref):
            raise NotFound(f"no secret {ref!r}")

    async def forget(self, user_id: str) -> int:
        """Every E2B secret of a removed member's."""
        return await self._repo.delete(user_id, None)

    async def check(self, holder: str | None, rules: tuple[HeaderRule, ...]) -> None:
        """Refuse rules naming secrets the holder does not have (before they are kept)."""
        wanted = sorted({n for r in rules for n in r.secrets()})
        have = {s.name for s in await self._repo.all(holder)}
        if missing := [n for n in wanted if n not in have]:
            # 400, not 404: the SDK reads a 404 on a sandbox's call as the sandbox gone.
            raise InvalidRequest(
                f"network rules name secrets that do not exist: {', '.join(missing)} "
                "(create them with Secret.create)"
            )

    # -- services/gateway.py HeaderSecrets ----------------------------------------------
    async def header_rules(self) -> dict[str, tuple[HeaderRule, ...]]:
        return {
            box_id: extras.network_rules
            for box_id, extras in (await self._sandboxes.all()).items()
            if extras.network_rules
        }

    async def values(self, holder: str | None, names: list[str]) -> dict[str, str]:
        return await self._repo.values(holder, names)
