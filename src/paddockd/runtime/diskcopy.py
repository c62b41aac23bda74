"""Copies of a box's disk at the speed of metadata: reflinks on the engine's filesystem.

A box's writable layer is an ext4 filesystem in a file (boxdisk.py) on the engine's XFS,
which shares extents between files (`reflink=1`): a copy of the file is a new inode
pointing at the same blocks, made in milliseconds whatever their number, and a block
written later by either side is copied then (copy-on-write). A snapshot of a running box
is such a copy taken while the box's filesystem is frozen (FIFREEZE): the kernel flushes
it and holds every writer, so the copy is the filesystem as a clean unmount leaves it.

A freeze that outlived its copy would hang the box (and everything that waits on it), so
it is never held by paddockd: `frozen_copy` runs this module as a program of its own,
which freezes, copies and thaws, with a watchdog process beside it that thaws the
filesystem after a hard time limit whatever became of the program or of paddockd (both
killed, the box blocking in its own filesystem). The watchdog is a separate process of
its own session, so a signal to paddockd's process group does not reach it.

Stdlib only: it is run as a program for every snapshot.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FIFREEZE = 0xC0045877
FITHAW = 0xC0045878
FICLONE = 0x40049409
FS_IOC_FIEMAP = 0xC020660B
_EXTENT_LAST = 0x1
_EXTENT_SHARED = 0x2000
_FIEMAP_HEAD = struct.Struct("=QQLLLL")  # start, length, flags, mapped, count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQQQLLLL")  # logical, physical, length, 2 spare, flags..
_BATCH = 256
# The longest a box's filesystem may stay frozen, whatever happens: FIFREEZE itself
# waits for the box's writes in flight to drain, and a copy is a few milliseconds.
FREEZE_LIMIT = 5.0
_FAULT = "PADDOCKD_FAULT"
_PROGRAM = "paddockd.runtime.diskcopy"


_libc = ctypes.CDLL(None, use_errno=True)


class CopyFailed(OSError):
    """The copy was not made; the message says why (nothing half-made is left)."""


@dataclass(frozen=True)
class Usage:
    """A disk file's allocated bytes: `own`, in no other file; `shared`, in others too."""

    own: int
    shared: int


def clone(source: Path, dest: Path) -> None:
    """`dest` becomes a reflink copy of `source`; it has its name only once complete."""
    partial = dest.with_name(dest.name + ".new")
    try:
        src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            out = os.open(
                partial,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                fcntl.ioctl(out, FICLONE, src)
                os.fsync(out)
            finally:
                os.close(out)
        finally:
            os.close(src)
        os.rename(partial, dest)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        if exc.errno in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL):
            raise CopyFailed(exc.errno, f"{source}: no copy-on-write copies here") from exc
        raise


def reflinks(folder: Path) -> bool:
    """Whether files in `folder` can share extents (one probe file, gone after)."""
    probe = folder / ".reflink-probe"
    copy = folder / ".reflink-probe.copy"
    try:
        probe.write_bytes(b"x" * 4096)
        clone(probe, copy)
        return True
    except OSError:
        return False
    finally:
        for path in (probe, copy):
            with contextlib.suppress(OSError):
                path.unlink()


def thaw(mount: Path) -> bool:
    """Thaw the filesystem mounted at `mount`; whether it was frozen."""
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, FITHAW, 0)
        return True
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # not frozen
            return False
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def _frozen(mount: Path) -> Iterator[None]:
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, FIFREEZE, 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):  # EINVAL: the watchdog thawed it already
                fcntl.ioctl(fd, FITHAW, 0)
    finally:
        os.close(fd)


def frozen_copy(mount: Path, source: Path, dest: Path, limit: float = FREEZE_LIMIT) -> None:
    """Copy `source` (the disk mounted at `mount`) to `dest` under a freeze of at most
    `limit` seconds, in a program of its own (see the module's docstring)."""
    done = subprocess.run(
        [sys.executable, "-m", _PROGRAM, "copy", *map(str, (mount, source, dest, limit))],
        capture_output=True,
        text=True,
        timeout=limit + 30,
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", _FAULT)},
    )
    if done.returncode != 0:
        with contextlib.suppress(OSError):
            dest.unlink()
        why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise CopyFailed(errno.EIO, why[0])


def synced_copy(mount: Path, source: Path, dest: Path) -> None:
    """Copy the disk mounted at `mount` of a box that is not running (nothing writes to
    it): its filesystem flushed first, no freeze needed."""
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if _libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs {mount}: {os.strerror(code)}")
    finally:
        os.close(fd)
    clone(source, dest)


def _watchdog(mount: Path, limit: float) -> int:
    """A process of its own session that thaws `mount` after `limit` seconds unless it is
    killed first; its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only sleeps and thaws
        code = 0
        try:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            time.sleep(limit)
            if thaw(mount):
                print(f"thawed {mount} after {limit:g} s", file=sys.stderr)
        except BaseException:
            code = 1
        os._exit(code)
    return pid


def _copy_program(mount: Path, source: Path, dest: Path, limit: float) -> None:
    guard = _watchdog(mount, limit)
    try:
        with _frozen(mount):
            if os.environ.get(_FAULT) == "snapshot.frozen":
                # The fault suite's worst case: the copier dies with the freeze held.
                os.kill(os.getpid(), signal.SIGKILL)
            clone(source, dest)
    finally:
        with contextlib.suppress(OSError):
            os.kill(guard, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(guard, 0)


def usage(path: Path) -> Usage:
    """Allocated bytes of the file at `path`, split by whether another file shares them."""
    own = shared = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        start = 0
        while True:
            buf = bytearray(_FIEMAP_HEAD.size + _BATCH * _FIEMAP_EXTENT.size)
            _FIEMAP_HEAD.pack_into(buf, 0, start, (1 << 64) - 1 - start, 0, 0, _BATCH, 0)
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            mapped = _FIEMAP_HEAD.unpack_from(buf, 0)[3]
            last = mapped == 0
            for i in range(mapped):
                logical, _, length, _, _, flags, *_ = _FIEMAP_EXTENT.unpack_from(
                    buf, _FIEMAP_HEAD.size + i * _FIEMAP_EXTENT.size
                )
                if flags & _EXTENT_SHARED:
                    shared += length
                else:
                    own += length
                start = logical + length
                last = last or bool(flags & _EXTENT_LAST)
            if last:
                return Usage(own, shared)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[0] == "copy":
        try:
            _copy_program(Path(argv[1]), Path(argv[2]), Path(argv[3]), float(argv[4]))
        except OSError as exc:
            print(f"copying {argv[2]}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        return 0
    print(f"usage: python -m {_PROGRAM} copy MOUNT SOURCE DEST LIMIT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
