"""A saved disk read and written as bytes, for a box's export and import: its data ranges
(holes skipped, as the file keeps them), and a new disk written at offsets and checked as
a filesystem before it gets its name.

An imported disk is bytes a user sent, which the host kernel would then mount: before it
is named it must pass `e2fsck -fn` and carry only the filesystem features this server's
own disks are made with, so a crafted image never reaches the kernel's ext4 code in a
state that tool rejects.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20  # the most one read returns
FSCK_TIMEOUT = 600.0
# What make_ext4 (drivefs.py) gives a disk, and what the engine's own mkfs defaults add;
# a disk with any other feature was not made by a Paddock server.
FEATURES = frozenset(
    {
        "has_journal",
        "ext_attr",
        "resize_inode",
        "dir_index",
        "filetype",
        "extent",
        "64bit",
        "flex_bg",
        "sparse_super",
        "large_file",
        "huge_file",
        "dir_nlink",
        "extra_isize",
        "metadata_csum",
        "inline_data",
        "orphan_file",
        "metadata_csum_seed",
    }
)
# Not needs_recovery: a disk copied stopped or frozen has its journal empty, and a mount
# would replay a journal that was sent.


class DiskReader:
    """The data of a saved disk, opened once: a removal of its name meanwhile (a snapshot
    deleted during its export) leaves these bytes readable to the end."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.size = os.fstat(self._fd).st_size

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of every data range, in order, in pieces of at most CHUNK."""
        offset = 0
        while offset < self.size:
            try:
                start = os.lseek(self._fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole from here to the end
                return
            end = os.lseek(self._fd, start, os.SEEK_HOLE)
            while start < end:
                data = os.pread(self._fd, min(CHUNK, end - start), start)
                if not data:
                    return
                yield start, data
                start += len(data)
            offset = end

    def close(self) -> None:
        os.close(self._fd)


class DiskWriter:
    """A new saved disk of `size` bytes at `dest`, written as `.new` beside it; `commit`
    checks it and gives it its name, `abort` removes it."""

    def __init__(self, dest: Path, size: int) -> None:
        self._dest = dest
        self._partial = dest.with_name(dest.name + ".new")  # swept if a crash leaves it
        self.size = size
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd: int | None = os.open(self._partial, flags, 0o600)
        os.ftruncate(self._fd, size)

    def write(self, offset: int, data: bytes) -> None:
        if offset < 0 or offset + len(data) > self.size:
            raise ValueError("data past the end of the disk")
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def commit(self) -> None:
        """Check the written disk as a filesystem and name it; ValueError if it is not one
        this server makes."""
        assert self._fd is not None
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        check_filesystem(self._partial)
        os.rename(self._partial, self._dest)

    def abort(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._partial.unlink(missing_ok=True)


def check_filesystem(image: Path) -> None:
    """ValueError unless `image` is a clean ext4 filesystem with known features only."""
    try:
        head = subprocess.run(
            ["dumpe2fs", "-h", str(image)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        raise ValueError("the disk's filesystem could not be read in time") from exc
    features: set[str] = set()
    for line in head.stdout.splitlines():
        if line.startswith("Filesystem features:"):
            features = set(line.split(":", 1)[1].split())
    if head.returncode != 0 or not features:
        raise ValueError("the disk holds no ext4 filesystem")
    if unknown := features - FEATURES:
        raise ValueError(f"the disk's filesystem has features no Paddock disk has: {unknown}")
    try:
        fsck = subprocess.run(
            ["e2fsck", "-f", "-n", str(image)],
            capture_output=True,
            text=True,
            timeout=FSCK_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise ValueError("checking the disk's filesystem took too long") from exc
    if fsck.returncode != 0:  # -n changes nothing: anything found is an error
        tail = (fsck.stdout.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"the disk's filesystem is damaged ({tail})")
