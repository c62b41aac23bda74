"""Renaming a running box from the host.

A container's hostname is fixed when it is made, and the engine writes it again into the
box at every start: the UTS hostname, /etc/hostname and the box's own line in /etc/hosts.
A box made before its name was known (the warm pool's, services/pool.py) is renamed here
once it is claimed, and again after each start. All of it is done from the host, so it
works whatever the box's runtime profile allows its own root:
- the UTS hostname: a short-lived thread enters the box's UTS namespace and calls
  sethostname(2) (host root has every capability in the box's user namespace);
- /etc/hostname and /etc/hosts: the engine's own files of the container (HostnamePath,
  HostsPath), which it binds into the box. They are written where the engine keeps them,
  never through a path in the box's filesystem, which the box could have made a link.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
import threading
from collections.abc import Callable

# The box can write its /etc/hosts: never read more of it than a hosts file needs.
MAX_HOSTS_BYTES = 1 << 20
_CLONE_NEWUTS = 0x04000000
_libc = ctypes.CDLL(None, use_errno=True)


def _checked(rc: int, what: str) -> None:
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _sethostname_in(ns_fd: int, name: str) -> None:
    """sethostname(2) in the UTS namespace `ns_fd`, from a thread made for it. Namespaces
    are per thread in Linux, so paddockd's other threads stay in the host's; no way back is
    needed either: the thread ends here, with the namespace it entered."""
    raw = name.encode()
    failed: list[BaseException] = []

    def enter() -> None:
        try:
            _checked(_libc.setns(ns_fd, _CLONE_NEWUTS), "setns")
            _checked(_libc.sethostname(raw, len(raw)), "sethostname")
        except BaseException as exc:  # reported to the caller below
            failed.append(exc)

    thread = threading.Thread(target=enter, name="paddock-uts", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def renamed_hosts(text: str, old: str, new: str) -> str:
    """`text` (a hosts file) with the name `old` replaced by `new` wherever it stands as a
    name on an entry; comments and every other name are left as they are."""
    if not old:
        return text
    name = re.compile(rf"(?<=\s){re.escape(old)}(?=\s|$)")
    return "".join(
        line if line.lstrip().startswith("#") else name.sub(new, line)
        for line in text.splitlines(keepends=True)
    )


def _rewrite(path: str, change: Callable[[str], str]) -> None:
    # O_NONBLOCK: should the file ever be anything but a regular file, the open must not
    # hang on it; it is refused below.
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        text = os.read(fd, MAX_HOSTS_BYTES).decode(errors="surrogateescape")
        data = change(text).encode(errors="surrogateescape")
        # Written, then cut to length: the file keeps its blocks (on a box's own full
        # disk a truncate first would free them, and the write would find none).
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def rename(pid: int, old: str, new: str, hostname_path: str, hosts_path: str) -> None:
    """Rename the box whose init is host process `pid` from `old` to `new` (blocking)."""
    fd = os.open(f"/proc/{pid}/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    try:
        # A pid that is no longer the box's must never rename the host.
        if os.fstat(fd).st_ino == os.stat("/proc/self/ns/uts").st_ino:
            raise OSError(errno.EPERM, f"process {pid} is in the host's UTS namespace")
        _sethostname_in(fd, new)
    finally:
        os.close(fd)
    _rewrite(hostname_path, lambda _: f"{new}\n")
    _rewrite(hosts_path, lambda text: renamed_hosts(text, old, new))
