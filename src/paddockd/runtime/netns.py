"""Sockets made inside a box's network namespace, for preview URLs.

paddockd never routes to box addresses from the host (ARCHITECTURE.md): a preview reaches
the box's web server on the box's own loopback instead. A socket belongs to the network
namespace it was created in, whatever thread later uses it; so a short-lived thread
enters the box's namespace, creates the socket, and ends. Namespaces are per thread in
Linux (setns(2) with CLONE_NEWNET changes only the caller), so paddockd's other threads
never see the box's network, and a thread that could not come back simply dies with it.

The namespace is held by an open file descriptor taken while the box's container ran with
a known init pid (`NetNamespace.of_pid`): a descriptor keeps the namespace itself, never
whatever process later reuses the pid. Once the box stops, connections through it are
refused (the namespace is empty), never redirected elsewhere.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

CLONE_NEWNET = 0x40000000
CLONE_NEWUTS = 0x04000000
_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def _setns(fd: int, nstype: int) -> None:
    if _libc.setns(fd, nstype) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


def in_namespace(fd: int, nstype: int, job: Callable[[], T]) -> T:
    """`job`'s result, run by a thread made to enter the namespace `fd` and then end
    (blocking). No way back is needed: the thread dies with the namespace it entered."""
    done: list[T] = []
    failed: list[BaseException] = []

    def enter() -> None:
        try:
            _setns(fd, nstype)
            done.append(job())
        except BaseException as exc:  # reported to the caller below
            failed.append(exc)

    thread = threading.Thread(target=enter, name="paddock-ns", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


class NetNamespace:
    """An open handle on one network namespace; `close` it when the box stops."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def of_pid(cls, pid: int) -> NetNamespace:
        """The namespace of process `pid` (blocking). Refuses the host's own namespace: a
        pid that is no longer the box's must never lead to paddockd's loopback."""
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_ino == os.stat("/proc/self/ns/net").st_ino:
                raise OSError(errno.EPERM, f"process {pid} is in the host's network namespace")
        except BaseException:
            os.close(fd)
            raise
        return cls(fd)

    def socket(self) -> socket.socket:
        """A new TCP socket in this namespace (blocking: a thread is made and ended)."""
        return in_namespace(
            self._fd, CLONE_NEWNET, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        )

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        return self._fd < 0
