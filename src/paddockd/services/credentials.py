"""Model-provider credentials: set, list (never the secret), delete, attach to boxes, and
the environment they become, only where asked: a box's execs once attached, or an
agent run (issue 6's `prompt`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.accounts import User, owner_only
from ..domain.agents import shell_env
from ..domain.credentials import PROVIDERS, check_base_url, check_key, provider
from ..domain.errors import NotFound
from ..store.credentials import CredentialRepository
from .boxes import BoxService


@dataclass(frozen=True)
class ProviderStatus:
    provider: str
    configured: bool
    base_url: str | None
    last_used_at: float | None


class CredentialService:
    def __init__(self, repo: CredentialRepository, boxes: BoxService) -> None:
        self._repo = repo
        self._boxes = boxes

    async def set(self, name: str, key: str, base_url: str | None = None) -> ProviderStatus:
        p = provider(name)
        await self._repo.put(p.name, check_key(key), check_base_url(base_url))
        return next(s for s in await self.statuses() if s.provider == p.name)

    async def statuses(self) -> list[ProviderStatus]:
        stored = {c.provider: c for c in await self._repo.all()}
        return [
            ProviderStatus(
                name,
                name in stored,
                stored[name].base_url if name in stored else None,
                stored[name].last_used_at if name in stored else None,
            )
            for name in PROVIDERS
        ]

    async def delete(self, name: str) -> None:
        p = provider(name)
        if not await self._repo.delete(p.name):
            raise NotFound(f"no credentials are set for {p.name}")

    async def attach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        """Give the box's commands this provider's key (and base URL) from now on."""
        box = await self._boxes.resolve(ref, caller)
        owner_only(caller, "provider keys are the server owner's: a member cannot attach them")
        p = provider(name)
        if p.name not in {c.provider for c in await self._repo.all()}:
            raise NotFound(f"no credentials are set for {p.name}: run `paddock auth set {p.name}`")
        await self._repo.attach(box.id, p.name)
        return await self._repo.attached(box.id)

    async def detach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        box = await self._boxes.resolve(ref, caller)
        await self._repo.detach(box.id, provider(name).name)
        return await self._repo.attached(box.id)

    async def attached(self, ref: str, caller: User | None = None) -> list[str]:
        return await self._repo.attached((await self._boxes.resolve(ref, caller)).id)

    async def env_for_box(self, box_id: str) -> dict[str, str]:
        names = await self._repo.attached(box_id)
        return shell_env(await self.env_for(names)) if names else {}

    async def env_for(self, names: list[str]) -> dict[str, str]:
        env = {}
        for name, (secret, base_url) in (await self._repo.secrets(names)).items():
            p = PROVIDERS[name]
            env[p.key_env] = secret
            if base_url:
                env[p.base_url_env] = base_url
        return env
