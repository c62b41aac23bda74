"""Copies of a box's disk at the speed of metadata: reflinks on the engine's filesystem.

A box's writable layer is an ext4 filesystem in a file (boxdisk.py) on the engine's XFS,
which shares extents between files (`reflink=1`): a copy of the file is a new inode
pointing at the same blocks, made in milliseconds whatever their number, and a block
written later by either side is copied then (copy-on-write). A snapshot of a running box
is such a copy taken while the box's filesystem is frozen (FIFREEZE): the kernel flushes
it and holds every writer, so the copy is the filesystem as a clean unmount leaves it.

A freeze that outlived its copy would hang the box (and everything that waits on it), so
it is never held by paddockd: `frozen_copy` runs this module as a program of its own,
which flushes, freezes, copies and thaws, with a watchdog process beside it that thaws
the filesystem as soon as the program exits, and from the time limit on until it does,
whatever became of the program or of paddockd (killed; the box holding the freeze off
with a long write in flight). The watchdog is in a session of its own and ignores the
signals a service stop sends. Both hold the disk's lock file while they live, so no other
copy of that disk starts meanwhile and no sweep thaws it under them (`try_thaw`).

Stdlib only: it is run as a program for every snapshot.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
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


def clone(source: Path, dest: Path, durable: bool = True) -> None:
    """`dest` becomes a reflink copy of `source`; it has its name only once complete.
    `durable`: on disk before it is named (else the caller syncs it, see `_sync`)."""
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
                if durable:
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


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def frozen_copy(
    mount: Path, source: Path, dest: Path, lock: Path, limit: float = FREEZE_LIMIT
) -> None:
    """Copy `source` (the disk mounted at `mount`) to `dest` under a freeze of at most
    `limit` seconds, in a program of its own that holds `lock` (the disk's) for as long as
    it or its watchdog lives (see the module's docstring). Waits `limit` and a little
    more: a copier stuck past that (FIFREEZE waits for the box's writes in flight) is
    killed and left to its watchdog, which thaws the disk the moment the freeze lands."""
    argv = [sys.executable, "-P", "-s", "-m", _PROGRAM, "copy"]
    proc = subprocess.Popen(
        [*argv, *map(str, (mount, source, dest, lock, limit))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", _FAULT)},
    )
    try:
        _, err = proc.communicate(timeout=limit + 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped when it returns
        raise CopyFailed(
            errno.ETIMEDOUT, f"the box's disk did not freeze within {limit:g} s"
        ) from None
    if proc.returncode != 0:
        with contextlib.suppress(OSError):
            dest.unlink()
        why = (err or "").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise CopyFailed(errno.EIO, why[0])


def synced_copy(mount: Path, source: Path, dest: Path) -> None:
    """Copy the disk mounted at `mount` of a box that is not running (nothing writes to
    it): its filesystem flushed first, no freeze needed."""
    _syncfs(mount)
    clone(source, dest)


def _syncfs(mount: Path) -> None:
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if _libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs {mount}: {os.strerror(code)}")
    finally:
        os.close(fd)


def try_thaw(mount: Path, lock: Path) -> bool:
    """Thaw the disk at `mount` unless a copier (or its watchdog) holds its `lock`;
    whether it was frozen."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return thaw(mount)
    finally:
        os.close(fd)


def _watchdog(mount: Path, limit: float) -> int:
    """A process of its own session, deaf to the signals a service stop sends, that thaws
    `mount` once its parent (the copier) exits, and from `limit` seconds on every 50 ms
    until it does (a freeze that lands late is undone at once). It shares the copier's
    lock, so no other copy of the disk starts before it is done. Its pid."""
    pidfd = os.pidfd_open(os.getpid())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only waits and thaws
        code = 0
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for stream in (0, 1, 2):  # paddockd reads the copier's, not its watchdog's
                os.dup2(null, stream)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            if not select.select([pidfd], [], [], limit)[0]:
                while not select.select([pidfd], [], [], 0.05)[0]:
                    with contextlib.suppress(OSError):
                        thaw(mount)
            with contextlib.suppress(OSError):
                thaw(mount)  # the copier is gone: whatever it left frozen
        except BaseException:
            code = 1
        os._exit(code)
    os.close(pidfd)
    return pid


def _copy_program(mount: Path, source: Path, dest: Path, lock: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    held = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    _syncfs(mount)  # most of what the box wrote goes out before the freeze: a short one
    _watchdog(mount, limit)  # it lives on after this program: it is not waited for
    fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    fcntl.ioctl(fd, FIFREEZE, 0)
    try:
        if os.environ.get(_FAULT) == "snapshot.frozen":
            # The fault suite's worst case: the copier dies with the freeze held.
            os.kill(os.getpid(), signal.SIGKILL)
        if time.monotonic() > deadline:
            raise CopyFailed(errno.ETIMEDOUT, f"the disk took over {limit:g} s to freeze")
        clone(source, dest, durable=False)
    finally:
        try:
            fcntl.ioctl(fd, FITHAW, 0)
        except OSError as exc:
            # Thawed already: by the watchdog, so the copy may not be of one moment.
            with contextlib.suppress(OSError):
                dest.unlink()
            raise CopyFailed(errno.ETIMEDOUT, f"the freeze outlasted {limit:g} s") from exc
    _sync(dest)


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
    if len(argv) == 6 and argv[0] == "copy":
        try:
            paths = [Path(a) for a in argv[1:5]]
            _copy_program(paths[0], paths[1], paths[2], paths[3], float(argv[5]))
        except OSError as exc:
            print(f"copying {argv[2]}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        return 0
    print(f"usage: python -m {_PROGRAM} copy MOUNT SOURCE DEST LOCK LIMIT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
