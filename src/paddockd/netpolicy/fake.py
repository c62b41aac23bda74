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
        self.box_syncs = 0  # of them, one box's alone
        self.box_refuses = False  # one box's alone is left to a full sync
        self.forgotten: list[str] = []
        # Box ids whose isolation the next syncs report as failed, with the reason.
        self.failing: dict[str, str] = {}

    async def sync(self, boxes: list[BoxAddress]) -> dict[str, str]:
        self.syncs += 1
        self.enforced = {b.ip: b for b in boxes}
        return {b.box_id: self.failing[b.box_id] for b in boxes if b.box_id in self.failing}

    async def sync_box(self, box_id: str, box: BoxAddress | None) -> dict[str, str] | None:
        self.syncs += 1
        self.box_syncs += 1
        if self.box_refuses:
            return None
        self.enforced = {ip: b for ip, b in self.enforced.items() if b.box_id != box_id}
        if box is None:
            return {}
        if box.ip in self.enforced:
            return None  # another box's address: the full sync sorts it out
        self.enforced[box.ip] = box
        return {box_id: self.failing[box_id]} if box_id in self.failing else {}

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
