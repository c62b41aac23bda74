"""Connecting to a unix socket that a box made in its run folder, as host root, safely.

The box writes that folder (it is its /run/paddock): any name in it may be a symlink to a
host path, say the engine's own socket, which root would happily connect to. So the path
is walked one name at a time from a descriptor of the run folder, never following a link
(O_PATH | O_NOFOLLOW), every step is checked for what it must be (folders, then a socket
owned by a uid of the box's user namespace), and the connection goes to the very inode
that was checked, through /proc/self/fd (a name the box cannot change under us).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

from ..domain.errors import DesktopFailed

# Docker maps a box's uids 0..65535 onto the host range starting at the userns base.
_BOX_UIDS = 65536


class UnsafeSocket(DesktopFailed):
    """The box's socket path is not a plain socket of the box's own (a link, say)."""


def connect_box_socket(
    run_dir: Path, relative: str, userns_base: int | None, timeout: float
) -> socket.socket:
    """A connected stream socket to `run_dir/relative`. Raises UnsafeSocket when a name on
    the way is not what it must be, OSError when nothing listens."""
    names = [n for n in relative.split("/") if n]
    if not names or any(n in (".", "..") for n in names):
        raise ValueError(f"not a plain relative path: {relative!r}")
    fds = [os.open(run_dir, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)]
    try:
        for depth, name in enumerate(names):
            last = depth == len(names) - 1
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=fds[-1])
            except FileNotFoundError:
                raise OSError(f"no {relative} in the box's run folder") from None
            fds.append(fd)
            info = os.fstat(fd)
            kind_ok = stat.S_ISSOCK(info.st_mode) if last else stat.S_ISDIR(info.st_mode)
            if not kind_ok:
                kind = "a socket" if last else "a folder"
                raise UnsafeSocket(f"the box's {relative} is not {kind}: refused")
            if userns_base is not None and not (
                userns_base <= info.st_uid < userns_base + _BOX_UIDS
            ):
                raise UnsafeSocket(f"the box's {relative} is not the box's own: refused")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(f"/proc/self/fd/{fds[-1]}")
        except OSError:
            sock.close()
            raise
        return sock
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
