"""A network layer that remembers what it was told to enforce."""

from __future__ import annotations

from ..domain.network import Closed, closed_ranges
from .base import BoxAddress, Flow


class FakeNetwork:
    def __init__(self) -> None:
        self.enforced: dict[str, BoxAddress] = {}
        self.admitted: dict[tuple[str, str], int] = {}
        self.intercepted: dict[tuple[str, str], int] = {}
        self.pending: list[Flow] = []
        self.syncs = 0
        self.forgotten: list[str] = []
        # Box ids whose isolation the next syncs report as failed, with the reason.
        self.failing: dict[str, str] = {}

    async def sync(self, boxes: list[BoxAddress]) -> dict[str, str]:
        self.syncs += 1
        self.enforced = {b.ip: b for b in boxes}
        return {b.box_id: self.failing[b.box_id] for b in boxes if b.box_id in self.failing}

    def box_at(self, ip: str) -> BoxAddress | None:
        return self.enforced.get(ip)

    async def written(self, timeout: float) -> None:
        return None

    async def closed(self) -> list[Closed]:
        return closed_ranges(True, ["192.0.2.0/24"])  # TEST-NET-1 plays the host's network

    async def admit(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        for address, seconds in addresses:
            self.admitted[(box_ip, address)] = seconds

    async def intercept(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        for address, seconds in addresses:
            self.intercepted[(box_ip, address)] = seconds

    async def flows(self) -> list[Flow]:
        taken, self.pending = self.pending, []
        return taken

    async def forget_flows(self, ip: str) -> None:
        self.forgotten.append(ip)
