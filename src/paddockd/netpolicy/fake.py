"""A network layer that remembers what it was told to enforce."""

from __future__ import annotations

from .base import BoxAddress, Flow


class FakeNetwork:
    def __init__(self) -> None:
        self.enforced: dict[str, BoxAddress] = {}
        self.admitted: dict[tuple[str, str], int] = {}
        self.pending: list[Flow] = []
        self.syncs = 0

    async def sync(self, boxes: list[BoxAddress]) -> None:
        self.syncs += 1
        self.enforced = {b.ip: b for b in boxes}

    def box_at(self, ip: str) -> BoxAddress | None:
        return self.enforced.get(ip)

    async def admit(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        for address, seconds in addresses:
            self.admitted[(box_ip, address)] = seconds

    async def flows(self) -> list[Flow]:
        taken, self.pending = self.pending, []
        return taken
