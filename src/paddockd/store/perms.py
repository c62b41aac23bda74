"""State on disk is root's alone: the umask paddockd runs with, and the one-time fix-up
of what older versions (under umask 022) left readable by every local user: the database
(token digests, sealed keys), egress logs, run records and logs."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

UMASK = 0o077
"""Files paddockd creates are 0600 and folders 0700 unless it says otherwise."""

_GROUP_AND_OTHER = 0o077


def make_private(
    top: Path, mode: int = 0o700, skip: Callable[[Path], bool] = lambda _: False
) -> None:
    """Give `top` (a folder) `mode`, and take the group and other bits off every folder and
    regular file below it, keeping the owner's (a script stays executable). Links are
    neither followed nor changed; paths `skip` accepts are left as they are, with all
    below them."""
    if not top.is_dir():
        return
    os.chmod(top, mode)
    for root, dirs, files in os.walk(top, followlinks=False):
        here = Path(root)
        dirs[:] = [d for d in dirs if not skip(here / d)]
        for name in [*dirs, *files]:
            path = here / name
            if not skip(path):
                _drop_group_and_other(path)


def make_file_private(path: Path) -> None:
    """A folder or regular file loses its group and other bits; anything else, or nothing
    there, is left alone."""
    _drop_group_and_other(path)


def make_file_readable(path: Path) -> None:
    """A regular file (never a link, nor what one points at) readable by all, 0644."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o644)
    finally:
        os.close(fd)


def make_stream_private(fd: int) -> None:
    """The file behind `fd` (stdout into a log file, say) loses its group and other bits;
    a terminal, pipe or socket is left alone."""
    _private(fd)


def _drop_group_and_other(path: Path) -> None:
    # Only folders and regular files are opened (a device or FIFO could act on an open),
    # without following links, and what was opened is what gets changed: nothing can be
    # swapped in between.
    if not (path.is_dir() or path.is_file()) or path.is_symlink():
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone, or replaced by a link meanwhile (ELOOP)
        return
    try:
        _private(fd)
    finally:
        os.close(fd)


def _private(fd: int) -> None:
    info = os.fstat(fd)
    kind = stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)
    if kind and info.st_mode & _GROUP_AND_OTHER:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~_GROUP_AND_OTHER)
