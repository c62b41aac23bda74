"""Which coding agents the box image has, at which versions, and whether a provider key
they can use is set."""

from __future__ import annotations

from dataclasses import dataclass

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

    async def all(self) -> list[AgentStatus]:
        labels = await self._rt.image_labels(self._image) or {}
        versions = versions_from_label(labels.get(LABEL))
        configured = {s.provider for s in await self._credentials.statuses() if s.configured}
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
