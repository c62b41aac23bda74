"""Sockets made inside a box's network namespace, for preview URLs.

paddockd never routes to box addresses from the host (ARCHITECTURE.md): a preview reaches
the box's web server on the box's own loopback instead. A socket belongs to the network
namespace it was created in, whatever thread later uses it. So each namespace gets a
thread of its own that enters it once (setns(2) with CLONE_NEWNET changes only the
calling thread) and keeps a few unconnected sockets ready: taking one costs no thread
hop on a request's path. paddockd's other threads never see the box's network.

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
from collections import deque

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
SPARE = 4  # unconnected sockets kept ready per namespace


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


class NetNamespace:
    """An open handle on one network namespace; `close` it when done."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._spare: deque[socket.socket] = deque()
        self._wanted = threading.Condition()
        self._failed: OSError | None = None
        self._thread = threading.Thread(target=self._keep_spares, name="paddock-netns")
        self._thread.daemon = True
        self._thread.start()

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

    def _keep_spares(self) -> None:
        # This thread never leaves the namespace; it ends with `close`. Under the lock:
        # `close` cannot free the descriptor's number (for another file) before setns.
        with self._wanted:
            try:
                if self._fd >= 0:
                    _setns(self._fd)
            except OSError as exc:
                self._failed = exc
            while self._fd >= 0:
                while self._failed is None and len(self._spare) < SPARE:
                    try:
                        self._spare.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    except OSError as exc:
                        self._failed = exc
                self._wanted.notify_all()
                self._wanted.wait()
            while self._spare:
                self._spare.popleft().close()

    def spare(self) -> socket.socket | None:
        """A ready socket without waiting, or None (then `socket` waits for one)."""
        with self._wanted:
            if not self._spare:
                return None
            sock = self._spare.popleft()
            self._wanted.notify_all()
            return sock

    def socket(self, timeout: float = 5.0) -> socket.socket:
        """An unconnected TCP socket in this namespace (at once, unless the spares ran out:
        then it waits for the namespace's thread)."""
        with self._wanted:
            while not self._spare:
                if self._failed is not None:
                    raise self._failed
                if self._fd < 0:
                    raise OSError(errno.EBADF, "the box's network namespace was closed")
                self._wanted.notify_all()
                if not self._wanted.wait(timeout):
                    raise OSError(errno.ETIMEDOUT, "no socket from the box's namespace")
            sock = self._spare.popleft()
            self._wanted.notify_all()
            return sock

    def close(self) -> None:
        with self._wanted:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
                self._wanted.notify_all()

    @property
    def closed(self) -> bool:
        return self._fd < 0
