"""Model-provider credentials: set, list (never the secret), delete, attach to boxes, and
the environment they become, only where asked: a box's execs once attached, or an
agent run (`prompt`). A key of gateway mode (the default) never enters a box: the box gets
a placeholder and the credential gateway's URL (services/gateway.py); one of env mode is
put in the environment itself.

Keys are per user: `auth set/ls/rm` act on the caller's own (the owner's for owner
accounts and server tokens, see `Holders`). A box only ever gets its owner's keys, whoever
attaches them or starts a run in it: the owner acting on a member's box gives it the
member's key, never their own, so nobody's key reaches a box someone else owns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..domain.accounts import User, holder_of
from ..domain.agents import shell_env
from ..domain.box import Box
from ..domain.credentials import (
    PROVIDERS,
    KeyMode,
    check_base_url,
    check_key,
    check_mode,
    provider,
)
from ..domain.errors import NotFound
from ..store.credentials import CredentialRepository
from ..store.secrets import SecretRepository
from .accounts import AccountService
from .boxes import BoxService


@dataclass(frozen=True)
class ProviderStatus:
    provider: str
    configured: bool
    base_url: str | None
    last_used_at: float | None
    mode: KeyMode | None  # None: not set


class CredentialService:
    def __init__(
        self,
        repo: CredentialRepository,
        boxes: BoxService,
        accounts: AccountService,
        placeholders: SecretRepository,
        gateway_url: str,
    ) -> None:
        """`gateway_url`: the credential gateway as boxes reach it (http://ADDRESS)."""
        self._repo = repo
        self._boxes = boxes
        self._accounts = accounts
        self._placeholders = placeholders
        self._gateway_url = gateway_url
        # Told when a key is set or removed (the gateway keeps keys a moment).
        self.changed: list[Callable[[], None]] = []

    async def set(
        self,
        name: str,
        key: str,
        base_url: str | None = None,
        caller: User | None = None,
        mode: str | None = None,
    ) -> ProviderStatus:
        p = provider(name)
        await self._repo.put(
            holder_of(caller), p.name, check_key(key), check_base_url(base_url), check_mode(mode)
        )
        self._changed()
        return next(s for s in await self.statuses(caller) if s.provider == p.name)

    async def statuses(self, caller: User | None = None) -> list[ProviderStatus]:
        stored = {c.provider: c for c in await self._repo.all(holder_of(caller))}
        return [
            ProviderStatus(
                name,
                name in stored,
                stored[name].base_url if name in stored else None,
                stored[name].last_used_at if name in stored else None,
                stored[name].mode if name in stored else None,
            )
            for name in PROVIDERS
        ]

    async def delete(self, name: str, caller: User | None = None) -> None:
        """Forget the caller's key; the boxes that had it attached (theirs: no other box
        can have it) lose it."""
        p = provider(name)
        holder = holder_of(caller)
        if not await self._repo.delete(holder, await self._boxes_of(holder), p.name):
            raise NotFound(f"no credentials are set for {p.name}")
        self._changed()

    def _changed(self) -> None:
        for tell in self.changed:
            tell()

    async def forget(self, user_id: str) -> int:
        """Every key of a removed member's (nobody can manage or rightly use them now)."""
        return await self._repo.delete(user_id, await self._boxes_of(user_id))

    async def _boxes_of(self, holder: str | None) -> list[str]:
        holders = await self._accounts.holders()
        return [b.id for b in await self._boxes.all() if holders.of(b.owner_id) == holder]

    async def attach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        """Give the box's commands this provider's key (and base URL) from now on: the
        key of the box's owner."""
        box = await self._boxes.resolve(ref, caller)
        p = provider(name)
        if p.name not in {c.provider for c in await self._repo.all(await self._box_holder(box))}:
            raise NotFound(
                f"no credentials are set for {p.name}: {await self.hint(box, caller, p.name)}"
            )
        await self._repo.attach(box.id, p.name)
        return await self._repo.attached(box.id)

    async def hint(self, box: Box, caller: User | None, name: str) -> str:
        """How the box's owner's missing key gets set, as told to `caller`."""
        if caller is None or await self._box_holder(box) == caller.holder:
            return f"set it on the dashboard's Credentials page, or run `paddock auth set {name}`"
        whose = (await self._accounts.owners()).get(box.owner_id, "its removed owner")
        return f"box {box.name} gets only its owner's keys, and {whose} has not set one"

    async def _box_holder(self, box: Box) -> str | None:
        return (await self._accounts.holders()).of(box.owner_id)

    async def detach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        box = await self._boxes.resolve(ref, caller)
        await self._repo.detach(box.id, provider(name).name)
        return await self._repo.attached(box.id)

    async def attached(self, ref: str, caller: User | None = None) -> list[str]:
        return await self._repo.attached((await self._boxes.resolve(ref, caller)).id)

    async def env_for_box(self, box: Box) -> dict[str, str]:
        names = await self._repo.attached(box.id)
        return shell_env(await self.env_for(box, names)) if names else {}

    async def env_for(self, box: Box, names: list[str]) -> dict[str, str]:
        """The environment of these providers' keys (the box owner's): for a key of
        gateway mode, the box's placeholder and the gateway's URL for the provider."""
        env = {}
        keys = await self._repo.keys(await self._box_holder(box), names)
        for name, key in keys.items():
            p = PROVIDERS[name]
            if key.mode == "env":
                env[p.key_env] = key.secret
                if key.base_url:
                    env[p.base_url_env] = key.base_url
                continue
            env[p.key_env] = await self._placeholders.placeholder(box.id, "provider", name)
            env[p.base_url_env] = f"{self._gateway_url}/{name}"
        return env
