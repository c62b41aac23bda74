"""How much of the server boxes may claim, and whether one more fits (CPU, memory, and
room on the engine's disk)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config import Config
from ..domain.accounts import Limits
from ..domain.box import Box, BoxType, Desired
from ..domain.errors import CapacityExceeded, StorageLow


def host_memory_mb() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))


@dataclass(frozen=True)
class Capacity:
    cpus: float
    memory_mb: int
    data_root: str = ""  # the engine's; "" checks no disk
    min_free_mb: int = 0

    @classmethod
    def from_config(cls, cfg: Config) -> Capacity:
        cpus = cfg.capacity_cpus or (os.cpu_count() or 1) * cfg.cpu_overcommit
        memory = cfg.capacity_memory_mb or max(host_memory_mb() - cfg.memory_reserve_mb, 0)
        return cls(float(cpus), int(memory), cfg.engine.data_root, cfg.engine.min_free_mb)

    def check_disk(self, what: str) -> None:
        """Refuse what would write new layers when the engine's disk is nearly full: what
        runs keeps running and can still be stopped, removed or pulled from."""
        if not self.data_root or not self.min_free_mb:
            return
        try:
            st = os.statvfs(self.data_root)
        except OSError:
            return  # no such folder: the engine reports its own trouble
        free_mb = st.f_bavail * st.f_frsize // (1024 * 1024)
        if free_mb < self.min_free_mb:
            raise StorageLow(
                f"not enough disk for {what}: {free_mb} MiB free on {self.data_root}, "
                f"below the {self.min_free_mb} MiB paddockd keeps free. Remove boxes, "
                "snapshots or drives you no longer need (`paddock ls`, `paddock snapshots`, "
                "`paddock drive ls`), or grow the engine's disk (docs/server.md).",
                details={"free_mb": free_mb, "min_free_mb": self.min_free_mb},
            )

    @staticmethod
    def used(boxes: list[Box]) -> tuple[float, int]:
        claiming = [b for b in boxes if b.desired == Desired.RUNNING]
        return sum(b.cpus for b in claiming), sum(b.memory_mb for b in claiming)

    def left(self, boxes: list[Box], held: tuple[float, int] = (0.0, 0)) -> tuple[float, int]:
        """CPUs and memory left once these boxes and `held` (the warm pool's) are counted."""
        cpus, memory = self.used(boxes)
        return self.cpus - cpus - held[0], self.memory_mb - memory - held[1]

    def fits(self, boxes: list[Box], want: BoxType, held: tuple[float, int] = (0.0, 0)) -> bool:
        cpus, memory = self.left(boxes, held)
        return want.cpus <= cpus + 1e-9 and want.memory_mb <= memory

    def check(self, boxes: list[Box], want: BoxType, advice: str = "") -> None:
        """Refuse a box that does not fit; `advice`: what the asker can do about it."""
        if not self.fits(boxes, want):
            cpus, memory = self.left(boxes)
            raise CapacityExceeded(
                f"the server is full: a {want.name} box needs {want.cpus:g} CPU and "
                f"{want.memory_mb} MiB, but only {max(cpus, 0):g} CPU and "
                f"{max(memory, 0)} MiB are left. "
                + (advice or "Stop a box (`paddock ls`); `paddock status` shows what it holds."),
                details={"cpus_left": cpus, "memory_mb_left": memory},
            )


def check_limits(limits: Limits, own: list[Box], want: BoxType, new: bool) -> None:
    """Refuse what would take a member past the limits the owner set them. `own`: the
    member's boxes (besides the one asked for); `new`: a box to be made, not resumed."""
    if new and limits.max_boxes is not None and len(own) >= limits.max_boxes:
        raise CapacityExceeded(
            f"your limit is {limits.max_boxes} box(es) and you have {len(own)}: remove one "
            "(`paddock ls`, `paddock rm`), or ask the server's owner to raise the limit",
            details={"limit": "max_boxes", "value": limits.max_boxes},
        )
    cpus, memory = Capacity.used(own)
    running = [b.name for b in own if b.desired == Desired.RUNNING]
    stop = (
        f"Stop one of your running boxes ({', '.join(running[:5])}: `paddock stop NAME`), "
        "take a smaller type (`paddock types`)"
        if running
        else "Take a smaller type (`paddock types`)"
    )
    if limits.max_cpus is not None and cpus + want.cpus > limits.max_cpus + 1e-9:
        raise CapacityExceeded(
            f"your limit is {limits.max_cpus:g} CPU for running boxes: {cpus:g} in use, and "
            f"a {want.name} box needs {want.cpus:g}. {stop}, or ask the server's owner to "
            "raise the limit",
            details={"limit": "max_cpus", "value": limits.max_cpus},
        )
    if limits.max_memory_mb is not None and memory + want.memory_mb > limits.max_memory_mb:
        raise CapacityExceeded(
            f"your limit is {limits.max_memory_mb} MiB of memory for running boxes: {memory} "
            f"MiB in use, and a {want.name} box needs {want.memory_mb}. {stop}, or ask the "
            "server's owner to raise the limit",
            details={"limit": "max_memory_mb", "value": limits.max_memory_mb},
        )
