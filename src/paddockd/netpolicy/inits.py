"""Each box container's init process as the network guard last found it, held by a pidfd.

A sync finds each box's bridge port from the network namespace of its container's init,
asked by pid. A pid kept from an earlier sync is only the init's while the init lives:
once it exits (its container restarted behind paddockd's back, say by an engine restart)
the number can go to any process, another box's too, and the box would be bound to that
box's port. So each pid is held with a pidfd, and one poll(2) per sync over all of them
finds those that exited; their containers are asked again.
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Callable, Iterable


class Inits:
    """Not thread-safe: the sync's lock covers it."""

    def __init__(self, pid_of: Callable[[str], int]) -> None:
        self._pid_of = pid_of
        self._held: dict[str, tuple[int, int]] = {}  # container id -> (pid, pidfd)

    def keep_only(self, cids: Iterable[str]) -> None:
        """Forget all but these containers, and any whose init exited."""
        wanted = set(cids)
        for cid in [c for c in self._held if c not in wanted]:
            self._forget(cid)
        if not self._held:
            return
        poller = select.poll()
        by_fd: dict[int, str] = {}
        for cid, (_, fd) in self._held.items():
            poller.register(fd, select.POLLIN)
            by_fd[fd] = cid
        for fd, _ in poller.poll(0):  # a pidfd is readable once its process exited
            self._forget(by_fd[fd])

    def pid(self, cid: str, fresh: bool = False) -> int:
        """The container's init (0 when it has none): as kept, unless `fresh`."""
        if fresh or cid not in self._held:
            self._forget(cid)
            pid = self._pid_of(cid)
            if pid <= 0:
                return 0
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                return 0  # exited already
            self._held[cid] = (pid, fd)
        return self._held[cid][0]

    def close(self) -> None:
        for cid in list(self._held):
            self._forget(cid)

    def _forget(self, cid: str) -> None:
        held = self._held.pop(cid, None)
        if held is not None:
            with contextlib.suppress(OSError):
                os.close(held[1])
