"""One file or folder of a drive, read or changed by host root in a folder boxes write
(E2B's volume content API): list, stat, make a folder, read, write, change owner or mode,
remove.

As in drive_archive.py, nothing follows a link or walks a path by name: each folder on the
way is opened beneath the one before with O_NOFOLLOW, so a box that swaps a folder for a
link to `/` makes the path fail, never reaches the host's files. A file is read only if
the descriptor opened is a regular file; a write goes to a new file beside the target,
then renamed over it (never opening what a box left there: a FIFO, a device, a link).
Owners are the boxes' ids (`base`: the host id of box root, when boxes run remapped)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 128
MAX_ENTRIES = 10_000  # in one listing
MAX_STEPS = 1_000_000  # folders entered or removed in one removal
CHUNK = 1 << 20
BOX_USER = 1000  # E2B's `user`, the box user
_MODE_BITS = 0o1777  # no setuid, no setgid


class Missing(FileNotFoundError):
    """No such path on the drive."""


class Unusable(ValueError):
    """A path or an entry this will not act on (`..`, a link on the way, not a file)."""


class Exists(FileExistsError):
    """Something is at the path already."""


def parts(path: str) -> list[str]:
    """A path on the drive as its names, `/` the drive's root; `..` and NUL refused."""
    if "\x00" in path or len(path) > 4096:
        raise Unusable("a path is at most 4096 characters, without NUL")
    names = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in names:
        raise Unusable("a path on a volume cannot hold '..'")
    if len(names) > MAX_DEPTH or any(len(n.encode()) > 255 for n in names):
        raise Unusable(f"a path is at most {MAX_DEPTH} names of 255 bytes")
    return names


@dataclass(frozen=True)
class Owner:
    """Box ids to host ids and back (None base: boxes are not remapped)."""

    base: int | None

    def host(self, box_id: int) -> int:
        if not 0 <= box_id < 65536:
            raise Unusable("uid and gid are 0 to 65535")
        return box_id + (self.base or 0)

    def box(self, host_id: int) -> int:
        if self.base is None:
            return host_id
        inside = host_id - self.base
        return inside if 0 <= inside < 65536 else 65534  # nobody, as a box sees it


def _open_dir(at: int, name: str) -> int:
    try:
        return os.open(name, _DIR, dir_fd=at)
    except FileNotFoundError:
        raise Missing(name) from None
    except NotADirectoryError:
        raise Unusable(f"{name} is not a folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link, never followed
            raise Unusable(f"{name} is not a folder (a link)") from None
        raise


@contextlib.contextmanager
def _folder(
    root: str, names: list[str], make: tuple[Owner, int, int, int] | None = None
) -> Iterator[int]:
    """The folder `names` leads to, opened; with `make` (owner, uid, gid, mode) the
    missing ones are made on the way."""
    fd = os.open(root, _DIR)
    try:
        for name in names:
            try:
                step = _open_dir(fd, name)
            except Missing:
                if make is None:
                    raise
                _mkdir(fd, name, *make)
                step = _open_dir(fd, name)
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


def _mkdir(at: int, name: str, owner: Owner, uid: int, gid: int, mode: int) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode & _MODE_BITS, dir_fd=at)
        made = os.open(name, _DIR, dir_fd=at)
        try:
            os.fchown(made, owner.host(uid), owner.host(gid))
            os.fchmod(made, mode & _MODE_BITS)
        finally:
            os.close(made)


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).isoformat()


def _entry(at: int, name: str, path: str, owner: Owner) -> dict[str, Any]:
    st = os.stat(name, dir_fd=at, follow_symlinks=False)
    kind = (
        "directory"
        if stat.S_ISDIR(st.st_mode)
        else "file"
        if stat.S_ISREG(st.st_mode)
        else "symlink"
        if stat.S_ISLNK(st.st_mode)
        else "unknown"
    )
    found: dict[str, Any] = {
        "name": name,
        "type": kind,
        "path": path,
        "size": st.st_size,
        "mode": stat.S_IMODE(st.st_mode),
        "uid": owner.box(st.st_uid),
        "gid": owner.box(st.st_gid),
        "atime": _iso(st.st_atime),
        "mtime": _iso(st.st_mtime),
        "ctime": _iso(st.st_ctime),
    }
    if kind == "symlink":
        found["target"] = os.readlink(name, dir_fd=at)
    return found


def _shown(names: list[str]) -> str:
    return "/" + "/".join(names)


def info(root: str, path: str, owner: Owner) -> dict[str, Any]:
    names = parts(path)
    if not names:
        return _entry_of_root(root, owner)
    with _folder(root, names[:-1]) as at:
        try:
            return _entry(at, names[-1], _shown(names), owner)
        except FileNotFoundError:
            raise Missing(path) from None


def _entry_of_root(root: str, owner: Owner) -> dict[str, Any]:
    parent, name = os.path.split(root.rstrip("/"))
    fd = os.open(parent or "/", _DIR)
    try:
        return {**_entry(fd, name, "/", owner), "name": ""}
    finally:
        os.close(fd)


def listing(root: str, path: str, depth: int, owner: Owner) -> list[dict[str, Any]]:
    """The folder's entries, and theirs down to `depth` levels (1: the folder's own)."""
    names = parts(path)
    found: list[dict[str, Any]] = []
    with _folder(root, names) as top:
        _list(top, names, max(1, depth), owner, found)
    return found


def _names(at: int, room: int) -> list[str]:
    """The folder's names, sorted; refused past `room` of them, before any more is read
    (a box can put millions in one folder)."""
    found: list[str] = []
    with os.scandir(at) as entries:
        for entry in entries:
            if len(found) >= room:
                raise Unusable(
                    f"more than {MAX_ENTRIES} entries: list a deeper folder, or less deep"
                )
            found.append(entry.name)
    return sorted(found)


def _list(at: int, names: list[str], depth: int, owner: Owner, out: list[dict[str, Any]]) -> None:
    for name in _names(at, MAX_ENTRIES - len(out)):
        try:
            entry = _entry(at, name, _shown([*names, name]), owner)
        except FileNotFoundError:
            continue  # gone meanwhile
        out.append(entry)
        if entry["type"] == "directory" and depth > 1 and len(names) < MAX_DEPTH:
            try:
                inner = _open_dir(at, name)
            except (Missing, Unusable):
                continue
            try:
                _list(inner, [*names, name], depth - 1, owner, out)
            finally:
                os.close(inner)


def make_dir(
    root: str, path: str, parents: bool, uid: int, gid: int, mode: int, owner: Owner
) -> dict[str, Any]:
    names = parts(path)
    if not names:
        raise Exists("/")
    make = (owner, uid, gid, 0o755) if parents else None
    with _folder(root, names[:-1], make) as at:
        try:
            os.mkdir(names[-1], mode & _MODE_BITS, dir_fd=at)
        except FileExistsError:
            raise Exists(path) from None
        made = _open_dir(at, names[-1])
        try:
            os.fchown(made, owner.host(uid), owner.host(gid))
            os.fchmod(made, mode & _MODE_BITS)
        finally:
            os.close(made)
        return _entry(at, names[-1], _shown(names), owner)


def _held(at: int, name: str, path: str) -> int:
    """An O_PATH descriptor of the entry itself (a link is not followed), to check before
    anything opens it."""
    try:
        return os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=at)
    except FileNotFoundError:
        raise Missing(path) from None


@contextlib.contextmanager
def opened(root: str, path: str) -> Iterator[int]:
    """A regular file of the drive, open for reading (checked through O_PATH first, so
    no FIFO or device is ever opened)."""
    names = parts(path)
    if not names:
        raise Unusable("/ is a folder")
    with _folder(root, names[:-1]) as at:
        held = _held(at, names[-1], path)
        try:
            if not stat.S_ISREG(os.fstat(held).st_mode):
                raise Unusable(f"{path} is not a file")
            fd = os.open(f"/proc/self/fd/{held}", _FILE)
        finally:
            os.close(held)
    try:
        yield fd
    finally:
        os.close(fd)


class Writing:
    """A file being written: a new file beside the target, renamed over it at `done`
    (or removed at `abort`), so the target is whole or untouched."""

    def __init__(
        self, root: str, path: str, parents: bool, uid: int, gid: int, mode: int, owner: Owner
    ) -> None:
        self.names = parts(path)
        if not self.names:
            raise Unusable("/ is a folder")
        make = (owner, uid, gid, 0o755) if parents else None
        with _folder(root, self.names[:-1], make) as at:
            self._at = os.dup(at)
        self._temp = f".paddock-upload-{secrets.token_hex(6)}"
        self._owner = owner
        try:
            self._fd = os.open(self._temp, _NEW, 0o600, dir_fd=self._at)
        except BaseException:
            os.close(self._at)
            raise
        try:
            os.fchown(self._fd, owner.host(uid), owner.host(gid))
            os.fchmod(self._fd, mode & _MODE_BITS)
        except BaseException:
            self.abort()
            raise

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def done(self) -> dict[str, Any]:
        try:
            os.close(self._fd)
            try:
                os.rename(self._temp, self.names[-1], src_dir_fd=self._at, dst_dir_fd=self._at)
            except IsADirectoryError:
                raise Exists(f"{_shown(self.names)} is a folder") from None
            return _entry(self._at, self.names[-1], _shown(self.names), self._owner)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self._temp, dir_fd=self._at)
            raise
        finally:
            os.close(self._at)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)
        with contextlib.suppress(OSError):
            os.unlink(self._temp, dir_fd=self._at)
        os.close(self._at)


def set_metadata(
    root: str, path: str, uid: int | None, gid: int | None, mode: int | None, owner: Owner
) -> dict[str, Any]:
    names = parts(path)
    if not names:
        raise Unusable("the volume's root keeps its owner and mode")
    with _folder(root, names[:-1]) as at:
        held = _held(at, names[-1], path)
        try:
            st = os.fstat(held)
            if stat.S_ISLNK(st.st_mode) and mode is not None:
                raise Unusable("a link has no mode of its own")
            if uid is not None or gid is not None:
                os.chown(
                    names[-1],
                    owner.host(uid) if uid is not None else -1,
                    owner.host(gid) if gid is not None else -1,
                    dir_fd=at,
                    follow_symlinks=False,
                )
            if mode is not None:
                # Through the descriptor: the inode checked above, whatever is named now.
                os.chmod(f"/proc/self/fd/{held}", mode & _MODE_BITS)
        finally:
            os.close(held)
        return _entry(at, names[-1], _shown(names), owner)


def remove(root: str, path: str) -> None:
    """A file or link, or a folder with all it holds."""
    names = parts(path)
    if not names:
        raise Unusable("the volume's root cannot be removed")
    with _folder(root, names[:-1]) as at:
        try:
            st = os.stat(names[-1], dir_fd=at, follow_symlinks=False)
        except FileNotFoundError:
            raise Missing(path) from None
        if stat.S_ISDIR(st.st_mode):
            _remove_folder(at, names[-1])
        else:
            os.unlink(names[-1], dir_fd=at)


def _remove_folder(at: int, name: str) -> None:
    """A folder and all it holds, each folder opened with O_NOFOLLOW beneath the last
    (shutil.rmtree opens what it walks into without it: a folder swapped for a link
    mid-walk would be followed). One descriptor a level, at most MAX_DEPTH deep, and a
    bounded number of steps however a box races it."""
    stack = [(_open_dir(at, name), name)]  # the folders being emptied, each in the last
    try:
        for _ in range(MAX_STEPS):
            if not stack:
                return
            fd, _name = stack[-1]
            inner = _empty_but_folders(fd)
            if inner is None:
                stack.pop()
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(_name, dir_fd=stack[-1][0] if stack else at)
                continue
            if len(stack) > MAX_DEPTH:
                raise Unusable(f"folders more than {MAX_DEPTH} deep")
            try:
                stack.append((_open_dir(fd, inner), inner))
            except Missing:
                continue
            except Unusable:  # swapped for a link meanwhile: the link goes, never followed
                with contextlib.suppress(OSError):
                    os.unlink(inner, dir_fd=fd)
        raise Unusable("the folder kept changing while it was removed")
    finally:
        for fd, _name in stack:
            os.close(fd)


def _empty_but_folders(fd: int) -> str | None:
    """Every entry of the folder but its folders unlinked; the first folder's name."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)
    return None
