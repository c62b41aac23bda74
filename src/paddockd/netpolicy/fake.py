"""A network layer that remembers what it was told to enforce."""

from __future__ import annotations

from ..domain.network import NetworkPolicy


class FakeNetwork:
    def __init__(self) -> None:
        self.enforced: dict[str, NetworkPolicy] = {}
        self.syncs = 0

    async def sync(self, boxes: list[tuple[str, NetworkPolicy]]) -> None:
        self.syncs += 1
        self.enforced = dict(boxes)
