"""What the services need from the network layer."""

from __future__ import annotations

from typing import Protocol


class NetworkPolicy(Protocol):
    async def ensure(self) -> None:
        """Put Paddock's table in place (idempotent; heals a flushed ruleset)."""
        ...
