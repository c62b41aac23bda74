"""A box's CPU time, memory and process count, read from its cgroup files.

Read here rather than through the engine's stats call: on Docker 20.10 that call waits for
the stats collector's next tick (about 1 s per box, `one_shot` included, measured here),
while these files answer in microseconds. CPU % needs two readings; `sample` is one.
cgroup v1 (one tree per controller) and v2 (one unified tree) are both read.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Sample:
    at_ns: int  # monotonic clock
    cpu_ns: int
    memory_bytes: int
    memory_limit_bytes: int | None
    pids: int
    pids_limit: int | None


def _paths(pid: int, root: Path, proc: Path, expect: str = "") -> dict[str, Path]:
    """Each controller's folder for the process (v2's under the key ""). `expect`: a
    word its cgroups must name (a container's id), else OSError: a pid kept from an
    earlier look may be another process's by now."""
    found: dict[str, Path] = {}
    text = (proc / str(pid) / "cgroup").read_text()
    if expect not in text:
        raise OSError(f"process {pid} is not in a cgroup of {expect}")
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = root / name / path.lstrip("/") if name else root / path.lstrip("/")
    return found


def _int(path: Path) -> int | None:
    """A number file's value; None for "max" or a v1 "no limit" (near 2**63)."""
    text = path.read_text().strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= 2**62 else value


def _stat(path: Path) -> dict[str, int]:
    pairs = (line.split() for line in path.read_text().splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2}


def sample(pid: int, root: Path = ROOT, proc: Path = Path("/proc"), expect: str = "") -> Sample:
    """The process's cgroup figures now. Raises OSError when they cannot be read (the box
    stopped, or an unknown layout) or do not name `expect`. Blocking."""
    paths = _paths(pid, root, proc, expect)
    at = time.monotonic_ns()
    if "memory" in paths:  # v1
        mem, cpu, pids = paths["memory"], paths["cpuacct"], paths["pids"]
        cpu_ns = _int(cpu / "cpuacct.usage") or 0
        usage = _int(mem / "memory.usage_in_bytes") or 0
        limit = _int(mem / "memory.limit_in_bytes")
        inactive = _stat(mem / "memory.stat").get("total_inactive_file", 0)
    else:  # v2
        mem = cpu = pids = paths[""]
        cpu_ns = _stat(cpu / "cpu.stat").get("usage_usec", 0) * 1000
        usage = _int(mem / "memory.current") or 0
        limit = _int(mem / "memory.max")
        inactive = _stat(mem / "memory.stat").get("inactive_file", 0)
    pids_limit = None
    with contextlib.suppress(OSError, ValueError):
        pids_limit = _int(pids / "pids.max")
    # As `docker stats` counts it: page cache the kernel can drop at once is not "used".
    used = max(0, usage - inactive)
    return Sample(at, cpu_ns, used, limit, _int(pids / "pids.current") or 0, pids_limit)


def cpu_percent(before: Sample, after: Sample) -> float:
    """CPU use between two samples, 100 being one whole CPU (as `docker stats` says)."""
    elapsed = after.at_ns - before.at_ns
    return round(100.0 * max(0, after.cpu_ns - before.cpu_ns) / elapsed, 1) if elapsed else 0.0


def confine(pid: int, name: str, cpus: float, weight: float = 0.25, root: Path = ROOT) -> Path:
    """Put process `pid` (all its threads) in a cgroup of its own, `name`, capped at `cpus`
    CPUs and with `weight` of a plain task's share: for host helpers every box can make
    work (LXCFS answers each box's /proc reads), so no box gets them to eat the host's
    CPUs. cgroup v1's cpu tree, else v2's unified one. Blocking; returns the folder."""
    period = 100_000
    if (root / "cpu").is_dir():
        folder = root / "cpu" / name
        folder.mkdir(exist_ok=True)
        (folder / "cpu.cfs_period_us").write_text(f"{period}\n")
        (folder / "cpu.cfs_quota_us").write_text(f"{int(cpus * period)}\n")
        (folder / "cpu.shares").write_text(f"{max(2, int(1024 * weight))}\n")
    else:
        folder = root / name
        folder.mkdir(exist_ok=True)
        (folder / "cpu.max").write_text(f"{int(cpus * period)} {period}\n")
        (folder / "cpu.weight").write_text(f"{max(1, int(100 * weight))}\n")
    (folder / "cgroup.procs").write_text(f"{pid}\n")
    return folder
