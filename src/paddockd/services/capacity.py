"""How much of the server boxes may claim, and whether one more fits.

Memory is what limits a server: each running box claims its type's memory, and the
claims together may come to `memory_overcommit` times the host's memory after a reserve
for the host (a box at rest uses a few MiB of its claim; its limit is a ceiling, enforced
per box by the kernel). Besides the claims, a box starts only while the host really has
more than the reserve available. CPU is shared: each box is capped at its type's CPUs and
weighted by them (cgroup shares), and is not counted unless the owner sets a CPU capacity
(`[capacity] cpus` or `cpu_overcommit`). The engine's disk is checked before anything
writes new layers."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import Config
from ..domain.accounts import Limits
from ..domain.box import Box, BoxType, Desired
from ..domain.errors import CapacityExceeded, StorageLow

# What a box needs of the host's memory to start beside the reserve: its init, its shell,
# the engine's shim (bench.load measures a box at rest at a few MiB).
START_MB = 64


def host_memory_mb() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))


def host_available_mb() -> int | None:
    """The kernel's estimate of memory available without swapping (MemAvailable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(frozen=True)
class Capacity:
    """`cpus`: what running boxes' CPUs may add up to (None: CPU is shared, not counted);
    `memory_mb`: what their memory claims may add up to; `reserve_mb`: host memory a new
    box must leave available (0: not checked); `overcommit`: `memory_mb` over the host's
    memory after the reserve, for the status (0: set by hand)."""

    cpus: float | None
    memory_mb: int
    data_root: str = ""  # the engine's; "" checks no disk
    min_free_mb: int = 0
    reserve_mb: int = 0
    overcommit: float = 0.0
    available_mb: Callable[[], int | None] = field(default=host_available_mb, compare=False)

    @classmethod
    def from_config(cls, cfg: Config) -> Capacity:
        cores = os.cpu_count() or 1
        cpus = cfg.capacity_cpus or (cores * cfg.cpu_overcommit if cfg.cpu_overcommit else None)
        if cfg.capacity_memory_mb:
            memory, reserve, overcommit = cfg.capacity_memory_mb, 0, 0.0
        else:
            overcommit = cfg.memory_overcommit
            host = max(host_memory_mb() - cfg.memory_reserve_mb, 0)
            memory, reserve = int(host * overcommit), cfg.memory_reserve_mb
        return cls(
            float(cpus) if cpus else None,
            int(memory),
            cfg.engine.data_root,
            cfg.engine.min_free_mb,
            reserve,
            overcommit,
        )

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
        """CPUs (infinite where CPU is not counted) and memory claims left once these
        boxes and `held` (the warm pool's) are counted."""
        cpus, memory = self.used(boxes)
        total = math.inf if self.cpus is None else self.cpus
        return total - cpus - held[0], self.memory_mb - memory - held[1]

    def fits(self, boxes: list[Box], want: BoxType, held: tuple[float, int] = (0.0, 0)) -> bool:
        cpus, memory = self.left(boxes, held)
        return want.cpus <= cpus + 1e-9 and want.memory_mb <= memory

    def host_short(self) -> int | None:
        """The host's available memory when it is too little for one more box to start
        beside the reserve; None when there is room (or nothing is checked)."""
        if not self.reserve_mb:
            return None
        available = self.available_mb()
        if available is None or available >= self.reserve_mb + START_MB:
            return None
        return available

    def check(
        self, boxes: list[Box], want: BoxType, advice: Callable[[], str] | None = None
    ) -> None:
        """Refuse a box that does not fit, naming what ran out; `advice`: what the asker
        can do about it (worked out only for a refusal)."""
        cpus, memory = self.left(boxes)
        short = None if want.memory_mb > memory or want.cpus > cpus + 1e-9 else self.host_short()
        if want.memory_mb <= memory and want.cpus <= cpus + 1e-9 and short is None:
            return
        told = advice() if advice else "Stop a box (`paddock ls`); `paddock status` shows it."
        if want.memory_mb > memory:
            how = (
                f"{self.overcommit:g}x the host's memory after its {self.reserve_mb} MiB "
                "reserve: [capacity] memory_overcommit"
                if self.overcommit
                else "[capacity] memory_mb"
            )
            raise CapacityExceeded(
                f"the server is full: a {want.name} box claims {want.memory_mb} MiB of "
                f"memory, and only {max(memory, 0)} MiB of the {self.memory_mb} MiB that "
                f"running boxes may claim ({how}) are left. {told}",
                details={
                    "resource": "memory",
                    "memory_mb_left": memory,
                    "cpus_left": None if self.cpus is None else cpus,
                },
            )
        if want.cpus > cpus + 1e-9:
            raise CapacityExceeded(
                f"the server is full: a {want.name} box needs {want.cpus:g} CPU, and only "
                f"{max(cpus, 0):g} of the {self.cpus:g} CPU that running boxes may claim "
                f"([capacity] cpus or cpu_overcommit) are left. {told}",
                details={"resource": "cpu", "memory_mb_left": memory, "cpus_left": cpus},
            )
        raise CapacityExceeded(
            f"the host is short of memory: {short} MiB available, and paddockd keeps "
            f"{self.reserve_mb} MiB for the host (boxes at work use what they claimed). "
            f"{told}",
            details={"resource": "host_memory", "available_mb": short},
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
