"""LXCFS: /proc files that show a box its own CPUs, memory and uptime, and keeping it up.

`nproc`, `free`, `top` and the JVM read /proc/cpuinfo, /proc/meminfo and friends, which
the kernel fills from the host's figures. LXCFS (Debian's `lxcfs`) serves copies of those
files over FUSE, computed from the cgroup of whichever process reads them; a box gets
read-only binds of them over its own /proc files.

Under systemd, Debian's lxcfs.service runs it. Elsewhere (CI, containers, this kind of
machine) paddockd starts it before any box and restarts it if it died.

A restart of LXCFS cannot reach boxes already running: their binds still point at the old
FUSE connection and every read answers ENOTCONN, and the kernel cannot even look such a
mount point up to unmount it. Those boxes get their views back on their next start (stop
and resume); `stale` finds them so the server can say so.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import time
from pathlib import Path

from . import cgroups

log = logging.getLogger("paddockd.lxcfs")

# What LXCFS 5 offers, relative to its mount point and to the box's root alike. Missing
# ones (older LXCFS) are skipped.
VIEWS = (
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/stat",
    "proc/uptime",
    "proc/loadavg",
    "proc/diskstats",
    "proc/swaps",
    "sys/devices/system/cpu/online",
)
# -l: /proc/loadavg per box; --enable-cfs: CPU count from the CFS quota as well as the
# cpuset, so a box whose cpuset could not be narrowed still sees its own share.
FLAGS = ("-f", "-l", "--enable-cfs")
# Its cgroup, and the CPUs it may use there (lxcfs.service.d/paddock.conf says the same).
CGROUP = "paddock-lxcfs"
CPUS = 0.5
PROBE = "proc/uptime"


class Lxcfs:
    def __init__(self, root: str, binary: str = "lxcfs", log_file: str = "") -> None:
        self.root = Path(root)
        self._binary = binary
        self._log_file = log_file

    def device(self) -> int | None:
        """The device of the live LXCFS mount; None when nothing answers there (not
        installed, not running, or a dead mount). Blocking."""
        try:
            probe = os.stat(self.root / PROBE)
            if probe.st_dev == os.stat(self.root.parent).st_dev:
                return None  # a plain folder, not the FUSE mount
        except OSError:
            return None
        return probe.st_dev

    def available(self) -> bool:
        return self.device() is not None

    def binds(self) -> dict[str, str]:
        """Host file -> where it goes in a box, for each view this LXCFS has."""
        return {str(self.root / view): f"/{view}" for view in VIEWS if (self.root / view).exists()}

    def ensure(self, wait: float = 10.0) -> bool:
        """Start LXCFS unless it answers; True once it does. Blocking."""
        if self.available():
            return True
        self._clear_dead_mount()
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with open(self._log_file or os.devnull, "ab") as out:
                # Its own session: it outlives paddockd restarts, as the engine does, so
                # the boxes' binds stay good.
                proc = subprocess.Popen(
                    [self._binary, *FLAGS, str(self.root)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            # Its work is every box's /proc reads, charged to none of them: capped, so a
            # box reading /proc in a loop slows only /proc reads (bench.neighbours).
            try:
                cgroups.confine(proc.pid, CGROUP, CPUS)
            except OSError as exc:
                log.warning("LXCFS runs without its CPU cap: %s", exc)
        except OSError as exc:
            log.warning("cannot start LXCFS (%s): boxes will see the host's CPUs and memory", exc)
            return False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.available():
                log.info("LXCFS mounted at %s", self.root)
                return True
            time.sleep(0.1)
        log.warning("LXCFS did not come up at %s within %.0fs", self.root, wait)
        return False

    def _clear_dead_mount(self) -> None:
        # A killed LXCFS can leave its mount behind (ENOTCONN): a new one cannot go there.
        try:
            os.stat(self.root / PROBE)
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:
                subprocess.run(["umount", "-l", str(self.root)], capture_output=True)

    @staticmethod
    def stale(pid: int) -> bool:
        """Whether a running box (its init's host pid) has views from an LXCFS that is
        gone. Only stats the path: a box cannot make that block. Blocking."""
        try:
            os.stat(f"/proc/{pid}/root/{PROBE}", follow_symlinks=False)
        except OSError as exc:
            return exc.errno == errno.ENOTCONN
        return False
