"""A drive's files as a tar and back (`paddockd backup --with-drives`, `restore`), done by
host root in a folder whose contents boxes wrote.

Nothing here follows a link or walks a path by name: each folder is opened beneath the
one before it with O_NOFOLLOW and read or written through its descriptor, so a box that
swaps a folder for a link to `/` mid-walk makes that folder unreadable, not the host's
files readable; a file is read only if the descriptor opened is the regular file listed.
Restoring, each entry is made beneath its folder's descriptor, never through a link the
tar made before it; links are stored and made as links, whatever they point at (a venv's
`bin/python -> /usr/bin/python3` is a box's own business). Owners are kept by number;
setuid and setgid bits are not; devices and sockets are left out."""

from __future__ import annotations

import contextlib
import os
import stat
import tarfile
from collections.abc import Iterator
from typing import IO

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Non-blocking: a FIFO swapped in for the file listed opens at once (and is then skipped).
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20
_KEPT_BITS = 0o1777  # no setuid, no setgid


class Refused(ValueError):
    """A tar entry this restore will not make (a path out of the folder, a device)."""


# -- writing -------------------------------------------------------------------------------
def write(folder: str, out: IO[bytes]) -> int:
    """The folder's files into a tar stream; how many entries it holds."""
    root = os.open(folder, _DIR)
    try:
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(_info(".", os.fstat(root)))
            return 1 + _walk(tar, root, ".", {})
    finally:
        os.close(root)


def _info(path: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    info.uname = info.gname = ""
    return info


def _walk(tar: tarfile.TarFile, folder: int, prefix: str, seen: dict[tuple[int, int], str]) -> int:
    count = 0
    for name in sorted(os.listdir(folder)):
        path = f"{prefix}/{name}"
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISDIR(st.st_mode):
            count += _folder(tar, folder, name, path, st, seen)
        elif stat.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                info = _info(path, st)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=folder)
                tar.addfile(info)
                count += 1
        elif stat.S_ISREG(st.st_mode):
            count += _file(tar, folder, name, path, st, seen)
        elif stat.S_ISFIFO(st.st_mode):
            info = _info(path, st)
            info.type = tarfile.FIFOTYPE
            tar.addfile(info)
            count += 1
    return count


def _folder(
    tar: tarfile.TarFile,
    parent: int,
    name: str,
    path: str,
    st: os.stat_result,
    seen: dict[tuple[int, int], str],
) -> int:
    fd = _open_listed(parent, name, _DIR, st)
    if fd is None:
        return 0  # swapped for a link, or gone: not followed
    try:
        opened = os.fstat(fd)
        info = _info(path, opened)
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        return 1 + _walk(tar, fd, path, seen)
    finally:
        os.close(fd)


def _file(
    tar: tarfile.TarFile,
    parent: int,
    name: str,
    path: str,
    st: os.stat_result,
    seen: dict[tuple[int, int], str],
) -> int:
    key = (st.st_dev, st.st_ino)
    if st.st_nlink > 1 and key in seen:
        info = _info(path, st)
        info.type, info.linkname = tarfile.LNKTYPE, seen[key]
        tar.addfile(info)
        return 1
    fd = _open_listed(parent, name, _FILE, st)
    if fd is None:
        return 0  # swapped meanwhile: not the file listed
    try:
        opened = os.fstat(fd)
        info = _info(path, opened)
        info.size = opened.st_size
        with os.fdopen(os.dup(fd), "rb") as f:
            tar.addfile(info, _Exactly(f, opened.st_size))
        if st.st_nlink > 1:
            seen[key] = path
        return 1
    finally:
        os.close(fd)


def _open_listed(parent: int, name: str, flags: int, st: os.stat_result) -> int | None:
    """`name` opened beneath `parent`, if it is still the very entry listed (same kind,
    same inode): a link or anything else swapped in is not opened, or is closed."""
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError:
        return None
    opened = os.fstat(fd)
    listed = (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino)
    if (stat.S_IFMT(opened.st_mode), opened.st_dev, opened.st_ino) != listed:
        os.close(fd)
        return None
    return fd


class _Exactly:
    """A file's bytes as the tar header says: a file that shrank meanwhile is padded, one
    that grew is cut (the copy is of a drive boxes may be writing to)."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        self._f, self._left = f, size

    def read(self, n: int = -1) -> bytes:
        want = self._left if n < 0 else min(n, self._left)
        data = self._f.read(want) if want else b""
        data += b"\0" * (want - len(data))
        self._left -= len(data)
        return data


# -- reading -------------------------------------------------------------------------------
def read(source: IO[bytes], folder: str) -> int:
    """Make the tar's entries in `folder` (empty, of this restore's own); how many."""
    root = os.open(folder, _DIR)
    count = 0
    try:
        with tarfile.open(fileobj=source, mode="r|") as tar:
            for member in tar:
                parts = _parts(member.name)
                if not parts:
                    _own(root, member)
                    continue
                with _beneath(root, parts[:-1]) as parent:
                    _make(tar, member, parent, parts[-1], root)
                count += 1
    except tarfile.TarError as exc:
        raise Refused(f"not a tar of a drive: {exc}") from None
    finally:
        os.close(root)
    return count


def _parts(name: str) -> list[str]:
    if name.startswith("/"):
        raise Refused(f"{name!r} is an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"{name!r} leads out of the drive")
    return parts


@contextlib.contextmanager
def _beneath(root: int, parts: list[str]) -> Iterator[int]:
    """The folder at `parts` under `root`, each step opened without following a link."""
    fd = os.dup(root)
    try:
        for part in parts:
            try:
                step = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                raise Refused(f"{'/'.join(parts)} is not a folder of the drive ({exc})") from None
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


def _make(tar: tarfile.TarFile, member: tarfile.TarInfo, parent: int, name: str, root: int) -> None:
    mode = member.mode & _KEPT_BITS
    if member.isdir():
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent)
        fd = os.open(name, _DIR, dir_fd=parent)
        try:
            os.fchown(fd, member.uid, member.gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    elif member.isreg():
        data = tar.extractfile(member)
        assert data is not None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=parent)
        try:
            while chunk := data.read(_CHUNK):
                os.write(fd, chunk)
            os.fchown(fd, member.uid, member.gid)
            os.fchmod(fd, mode)
            os.utime(fd, (member.mtime, member.mtime))
        finally:
            os.close(fd)
    elif member.issym():
        os.symlink(member.linkname, name, dir_fd=parent)
        os.chown(name, member.uid, member.gid, dir_fd=parent, follow_symlinks=False)
    elif member.islnk():
        target = _parts(member.linkname)
        if not target:
            raise Refused(f"{member.name!r} links to the drive's root")
        with _beneath(root, target[:-1]) as where:
            os.link(target[-1], name, src_dir_fd=where, dst_dir_fd=parent, follow_symlinks=False)
    elif member.isfifo():
        os.mkfifo(name, mode, dir_fd=parent)
        os.chown(name, member.uid, member.gid, dir_fd=parent, follow_symlinks=False)
    else:
        raise Refused(f"{member.name!r} is a device or another kind a drive does not hold")


def _own(root: int, member: tarfile.TarInfo) -> None:
    """The drive's root: its owner and mode as they were."""
    if member.isdir():
        os.fchown(root, member.uid, member.gid)
        os.fchmod(root, member.mode & _KEPT_BITS)
