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
# A file checked through an O_PATH descriptor is opened again through /proc/self/fd (a
# link there, by design): non-blocking and no controlling terminal, whatever it is.
_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20
_KEPT_BITS = 0o1777  # no setuid, no setgid


class Refused(ValueError):
    """A tar entry this restore will not make (a path out of the folder, a device)."""


# -- writing -------------------------------------------------------------------------------
MAX_DEPTH = 128  # folders deeper than this are left out (a box can nest them forever)


class TooBig(ValueError):
    """The drive's files came to more bytes than it may hold (sparse files, or files
    growing while they were read): it is left out rather than fill the host's disk."""


def write(folder: str, out: IO[bytes], budget: int) -> int:
    """The folder's files into a tar stream, at most `budget` bytes of file contents;
    how many entries it holds."""
    return _Writer(out, budget).run(folder)


class _Writer:
    def __init__(self, out: IO[bytes], budget: int) -> None:
        self._out = out
        self._left = budget
        self._seen: dict[tuple[int, int], str] = {}  # hard-linked files: first path
        self.count = 0

    def run(self, folder: str) -> int:
        root = os.open(folder, _DIR)
        # The folders being walked, one level each: (descriptor, its entries, path). At
        # most MAX_DEPTH + 1 are open at once, whatever a box made.
        levels: list[tuple[int, Iterator[os.DirEntry[str]], str]] = []
        try:
            with tarfile.open(fileobj=self._out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                self._add(tar, _info(".", os.fstat(root)))
                levels.append((root, os.scandir(root), "."))
                while levels:
                    fd, entries, prefix = levels[-1]
                    entry = next(entries, None)
                    if entry is None:
                        levels.pop()
                        os.close(fd)
                        continue
                    below = self._entry(tar, fd, entry.name, f"{prefix}/{entry.name}")
                    if below is not None and len(levels) <= MAX_DEPTH:
                        levels.append((below, os.scandir(below), f"{prefix}/{entry.name}"))
                    elif below is not None:
                        os.close(below)
        finally:
            for fd, _, _ in levels:
                os.close(fd)
        return self.count

    def _add(
        self, tar: tarfile.TarFile, info: tarfile.TarInfo, data: _Exactly | None = None
    ) -> None:
        tar.addfile(info, data)
        _forget_headers(tar)
        self.count += 1

    def _entry(self, tar: tarfile.TarFile, folder: int, name: str, path: str) -> int | None:
        """One entry into the tar; a folder's descriptor when it is one to walk."""
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return None  # gone meanwhile
        if stat.S_ISDIR(st.st_mode):
            fd = _open_listed(folder, name, _DIR, st)
            if fd is not None:  # else swapped for a link, or gone: not followed
                info = _info(path, os.fstat(fd))
                info.type = tarfile.DIRTYPE
                self._add(tar, info)
            return fd
        if stat.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                info = _info(path, st)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=folder)
                self._add(tar, info)
        elif stat.S_ISREG(st.st_mode):
            self._file(tar, folder, name, path, st)
        elif stat.S_ISFIFO(st.st_mode):
            info = _info(path, st)
            info.type = tarfile.FIFOTYPE
            self._add(tar, info)
        return None

    def _file(
        self, tar: tarfile.TarFile, parent: int, name: str, path: str, st: os.stat_result
    ) -> None:
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in self._seen:
            info = _info(path, st)
            info.type, info.linkname = tarfile.LNKTYPE, self._seen[key]
            self._add(tar, info)
            return
        fd = _open_file(parent, name, st)
        if fd is None:
            return  # swapped meanwhile: not the file listed
        try:
            opened = os.fstat(fd)
            if opened.st_size > self._left:
                raise TooBig(f"{path} would take the drive's copy past what the drive holds")
            self._left -= opened.st_size
            info = _info(path, opened)
            info.size = opened.st_size
            with os.fdopen(os.dup(fd), "rb") as f:
                self._add(tar, info, _Exactly(f, opened.st_size))
            if st.st_nlink > 1:
                self._seen[key] = path
        finally:
            os.close(fd)


def _forget_headers(tar: tarfile.TarFile) -> None:
    """A TarFile keeps every header it wrote or read, a stream's too: dropped as it goes,
    memory stays flat whatever the number of files."""
    tar.members.clear()  # type: ignore[attr-defined]


def _info(path: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    info.uname = info.gname = ""
    return info


def _open_listed(parent: int, name: str, flags: int, st: os.stat_result) -> int | None:
    """`name` opened beneath `parent`, if it is still the very entry listed (same kind,
    same inode): a link or anything else swapped in is not opened, or is closed."""
    try:
        return _kept_if_same(os.open(name, flags, dir_fd=parent), st)
    except OSError:
        return None


def _kept_if_same(fd: int, st: os.stat_result) -> int | None:
    """`fd`, if it is the entry listed; else closed."""
    if not _same(os.fstat(fd), st):
        os.close(fd)
        return None
    return fd


def _open_file(parent: int, name: str, st: os.stat_result) -> int | None:
    """A regular file for reading: first only named (O_PATH: nothing of a device a box
    swapped in runs, no driver's open), checked, then opened through that name."""
    try:
        where = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None
    try:
        checked = os.fstat(where)
        if not stat.S_ISREG(checked.st_mode) or not _same(checked, st):
            return None
        try:
            return _kept_if_same(os.open(f"/proc/self/fd/{where}", _FILE), st)
        except OSError:
            return None
    finally:
        os.close(where)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (stat.S_IFMT(a.st_mode), a.st_dev, a.st_ino) == (
        stat.S_IFMT(b.st_mode),
        b.st_dev,
        b.st_ino,
    )


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
                _forget_headers(tar)
                count += 1
    except (tarfile.TarError, ValueError) as exc:
        if isinstance(exc, Refused):
            raise
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
