"""Which coding agents the box image has, at which versions, and whether the caller has
set a provider key they can use."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.accounts import User
from ..domain.agents import AGENTS, versions_from_label
from ..runtime.base import Runtime
from .credentials import CredentialService

LABEL = "paddock.agents"


@dataclass(frozen=True)
class AgentStatus:
    name: str
    command: str
    package: str
    version: str | None  # None: not in the current image
    providers: tuple[str, ...]
    credentials: bool
    note: str


class AgentService:
    def __init__(self, runtime: Runtime, image: str, credentials: CredentialService) -> None:
        self._rt = runtime
        self._image = image
        self._credentials = credentials

    async def all(self, caller: User | None = None) -> list[AgentStatus]:
        labels = await self._rt.image_labels(self._image) or {}
        versions = versions_from_label(labels.get(LABEL))
        statuses = await self._credentials.statuses(caller)
        configured = {s.provider for s in statuses if s.configured}
        return [
            AgentStatus(
                a.name,
                a.command,
                a.package,
                versions.get(a.package),
                a.providers,
                bool(configured & set(a.providers)),
                a.note,
            )
            for a in AGENTS.values()
        ]
