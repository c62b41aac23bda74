"""Each box container's init process as the network guard last found it, held by a pidfd.

A sync finds each box's bridge port from the network namespace of its container's init,
asked by pid. A pid kept from an earlier sync is only the init's while the init lives:
once it exits (its container restarted behind paddockd's back, say by an engine restart)
the number can go to any process, another box's too, and the box would be bound to that
box's port. So each pid is held with a pidfd, and one poll(2) per sync over all of them
finds those that exited; their containers are asked again. The engine may name an init
that has just exited (its record lags the exit): a pid is kept only when, with its pidfd
open, its process is in the container's own cgroup.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
from collections.abc import Callable, Iterable

# A container's cgroup as the engine names it: its id (cgroupfs), or docker-ID.scope
# (systemd). A box names the cgroups it makes inside its own as it likes, never above it.
_CONTAINER = re.compile(r"(?:docker-)?([0-9a-f]{64})(?:\.scope)?")


class Inits:
    """Not thread-safe: the sync's lock covers it."""

    def __init__(self, pid_of: Callable[[str], int]) -> None:
        self._pid_of = pid_of
        self._held: dict[str, tuple[int, int]] = {}  # container id -> (pid, pidfd)

    def keep_only(self, cids: Iterable[str]) -> None:
        """Forget all but these containers, and any whose init exited."""
        wanted = set(cids)
        for cid in [c for c in self._held if c not in wanted]:
            self.drop(cid)
        if not self._held:
            return
        poller = select.poll()
        by_fd: dict[int, str] = {}
        for cid, (_, fd) in self._held.items():
            poller.register(fd, select.POLLIN)
            by_fd[fd] = cid
        for fd, _ in poller.poll(0):  # a pidfd is readable once its process exited
            self.drop(by_fd[fd])

    def pid(self, cid: str, fresh: bool = False, hint: int = 0) -> int:
        """The container's init (0 when it has none): as kept, unless `fresh`. `hint`:
        what the engine said of it a moment ago, taken (if its process is in the
        container's cgroup) instead of asking again."""
        if fresh or cid not in self._held:
            self.drop(cid)
            if hint > 0 and self._keep(cid, hint):
                return hint
            return self._keep(cid, self._pid_of(cid))
        return self._held[cid][0]

    def _keep(self, cid: str, pid: int) -> int:
        if pid <= 0:
            return 0
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return 0  # exited already
        try:
            kept = in_container(pid, cid) and not _exited(fd)
        except BaseException:
            os.close(fd)
            raise
        if not kept:
            os.close(fd)
            return 0
        self._held[cid] = (pid, fd)
        return pid

    def alive(self, cid: str) -> bool:
        """Whether the container's init kept by an earlier `pid` still lives."""
        held = self._held.get(cid)
        return held is not None and not _exited(held[1])

    def close(self) -> None:
        for cid in list(self._held):
            self.drop(cid)

    def drop(self, cid: str) -> None:
        """Forget the container's init (its pidfd closed)."""
        held = self._held.pop(cid, None)
        if held is not None:
            with contextlib.suppress(OSError):
                os.close(held[1])


def in_container(pid: int, cid: str) -> bool:
    """Whether the first container a process's cgroup path names is `cid` (a path naming
    none, a host process's, is no other box's either)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            text = f.read(65536)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ESRCH):
            return False
        raise
    named = first_container(text)
    return named is None or (len(cid) >= 12 and named.startswith(cid))


def first_container(cgroups: str) -> str | None:
    """The first container id on the paths of a /proc/PID/cgroup."""
    for line in cgroups.splitlines():
        for part in line.split(":", 2)[-1].split("/"):
            if (found := _CONTAINER.fullmatch(part)) is not None:
                return found.group(1)
    return None


def _exited(pidfd: int) -> bool:
    poller = select.poll()  # not select(2): a pidfd's number may pass FD_SETSIZE
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))
