"""What the services need from the network layer."""

from __future__ import annotations

from typing import Protocol

from ..domain.network import NetworkPolicy


class NetworkRules(Protocol):
    async def sync(self, boxes: list[tuple[str, NetworkPolicy]]) -> None:
        """Enforce exactly these (box address, policy) pairs; idempotent, atomic, and it
        heals a flushed ruleset."""
        ...
