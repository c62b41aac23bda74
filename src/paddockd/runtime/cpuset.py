"""Which host CPUs a box may run on.

A CFS quota caps how much CPU time a box gets, but `nproc` (coreutils) and most thread
pools count the CPUs in the process's affinity mask, which the quota does not change. So
each box also gets a cpuset of ceil(cpus) host CPUs, the least used by other running
boxes, so that boxes spread over the machine instead of piling onto CPU 0.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable


def parse(text: str) -> set[int]:
    """A cpuset list as the kernel and Docker write it ("0-3,6")."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def render(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def pick(cpus: float, host: Iterable[int], taken: Iterable[set[int]]) -> set[int]:
    """ceil(cpus) of the host's CPUs, the least used by `taken` (other boxes' cpusets)
    first and the lowest number on ties; all of them when the box wants as many or more."""
    available = sorted(host)
    want = max(1, math.ceil(cpus))
    if want >= len(available):
        return set(available)
    load: Counter[int] = Counter()
    for other in taken:
        load.update(other)
    return set(sorted(available, key=lambda c: (load[c], c))[:want])


class Placements:
    """The running boxes' cpusets, so that placing one box does not inspect all the others
    every time. Thread-safe: the lock also keeps two starts from choosing the same CPUs.

    What paddockd starts, stops and removes keeps it current. The engine's listings of
    running boxes, taken for the network's sync (running.py), are handed over with
    `running` and applied at the next choice: a box that stopped on its own only weighs on
    choices until then, and one running from before paddockd started is inspected once.
    `cpuset_of`: a running box's cpuset as the engine has it (None once it is not
    running); `host`: the CPUs boxes may have."""

    def __init__(
        self,
        cpuset_of: Callable[[str], set[int] | None],
        host: Callable[[], set[int]] = lambda: os.sched_getaffinity(0),
    ) -> None:
        self._cpuset_of = cpuset_of
        self._host = host
        self._lock = threading.Lock()
        self._cpusets: dict[str, set[int]] = {}
        self._placed_at: dict[str, float] = {}
        self._listed: tuple[set[str], float] | None = None

    def running(self, ids: set[str], since: float) -> None:
        """A listing begun at `since` (time.monotonic) found these box containers running.
        Called on the event loop: it never waits for `_lock`, which a start holds while
        the engine updates a box (one assignment; a listing lost to a choice made at the
        same moment is replaced by the next)."""
        self._listed = (set(ids), since)

    def place(self, cid: str, nano_cpus: int, keep: Callable[[set[int]], None]) -> set[int]:
        """Choose the box's CPUs (the least used by the other running boxes) and `keep`
        them (the engine's update, when they changed), as one step."""
        with self._lock:
            chosen = self._choose(cid, nano_cpus)
            keep(chosen)
            if cid:
                self._cpusets[cid] = chosen
                self._placed_at[cid] = time.monotonic()
            return chosen

    def started(self, cid: str) -> None:
        """The placed box's start returned: a listing begun before now may have missed it."""
        with self._lock:
            if cid in self._placed_at:
                self._placed_at[cid] = time.monotonic()

    def unplace(self, cid: str) -> None:
        with self._lock:
            self._forget(cid)

    def _choose(self, cid: str, nano_cpus: int) -> set[int]:
        self._forget(cid)
        listed, self._listed = self._listed, None
        if listed is not None:
            ids, since = listed
            # Absent from the listing is gone, unless placed after the listing began.
            for gone in [c for c in self._cpusets if c not in ids and self._placed_at[c] < since]:
                self._forget(gone)
            for other in ids - set(self._cpusets) - {cid}:
                if (cpus := self._cpuset_of(other)) is not None:
                    self._cpusets[other] = cpus
                    self._placed_at[other] = since
        host = self._host()
        return pick(nano_cpus / 1e9 or len(host), host, self._cpusets.values())

    def _forget(self, cid: str) -> None:
        self._cpusets.pop(cid, None)
        self._placed_at.pop(cid, None)
