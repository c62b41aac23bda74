"""Which host CPUs a box may run on.

A CFS quota caps how much CPU time a box gets, but `nproc` (coreutils) and most thread
pools count the CPUs in the process's affinity mask, which the quota does not change. So
each box also gets a cpuset of ceil(cpus) host CPUs, the least used by other running
boxes, so that boxes spread over the machine instead of piling onto CPU 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable


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
