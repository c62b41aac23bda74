"""Tar streams for push (built lazily from local files) and pull (extracted defensively).

A box is untrusted: `extract_stream` never writes outside its destination. It refuses
absolute and `..` member names, hard links to anything but a file it wrote, devices and
fifos; it opens every folder without following links, so it never writes through a
symlink (one in the archive, or one left by an earlier pull). Symlinks themselves are
kept as the box has them, wherever they point, as `docker cp` keeps them. A pull is
written aside and moved into place when whole: the first refusal fails it and leaves the
destination as it was.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import stat
import tarfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .wire.errors import Conflict, InvalidRequest, NotFound, PaddockError

BLOCK = 512
_READ = 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
IGNORE_FILE = ".paddockignore"

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Entry:
    local: Path
    arcname: str
    st: os.stat_result


@dataclass
class PushPlan:
    entries: list[Entry] = field(default_factory=list)
    total_bytes: int = 0


def _spec(lines: Iterable[str]):  # type: ignore[no-untyped-def]
    import pathspec  # imported on push only: it is not needed by any other command

    return pathspec.GitIgnoreSpec.from_lines(list(lines))


def plan_push(items: list[tuple[str, str]], excludes: list[str]) -> PushPlan:
    """Walk each (local path, name) once: the path goes in under that name, or, for a
    folder with the name "", as its contents. Where things land is `_placement`'s call."""
    plan = PushPlan()
    for path, name in items:
        src = Path(path)
        try:
            st = src.lstat()
        except FileNotFoundError:
            raise NotFound(f"no such file or directory: {src}") from None
        base = name or ("" if stat.S_ISDIR(st.st_mode) else src.name)
        if not stat.S_ISDIR(st.st_mode):
            _add(plan, src, base, st)
            continue
        patterns = list(excludes)
        ignore_file = src / IGNORE_FILE
        if ignore_file.is_file():
            patterns += ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        spec = _spec(patterns) if patterns else None
        if base:
            _add(plan, src, base, st)
        _walk(plan, src, base, spec)
    return plan


def _walk(plan: PushPlan, root: Path, base: str, spec: object) -> None:
    stack = [Path()]
    while stack:
        rel_dir = stack.pop()
        try:
            children = sorted(os.scandir(root / rel_dir), key=lambda e: e.name)
        except PermissionError as exc:
            raise InvalidRequest(f"cannot read {root / rel_dir}: permission denied") from exc
        for child in children:
            rel = (rel_dir / child.name).as_posix()
            st = child.stat(follow_symlinks=False)
            is_dir = stat.S_ISDIR(st.st_mode)
            if spec is not None and spec.match_file(rel + ("/" if is_dir else "")):  # type: ignore[attr-defined]
                continue
            _add(plan, Path(child.path), posixpath.join(base, rel) if base else rel, st)
            if is_dir:
                stack.append(rel_dir / child.name)


def _add(plan: PushPlan, local: Path, arcname: str, st: os.stat_result) -> None:
    plan.entries.append(Entry(local, arcname, st))
    if stat.S_ISREG(st.st_mode):
        plan.total_bytes += st.st_size


def _tarinfo(entry: Entry, uid: int, gid: int) -> tarfile.TarInfo:
    st = entry.st
    ti = tarfile.TarInfo(entry.arcname)
    ti.mode = stat.S_IMODE(st.st_mode)
    ti.mtime = int(st.st_mtime)
    ti.uid, ti.gid, ti.uname, ti.gname = uid, gid, "", ""
    if stat.S_ISDIR(st.st_mode):
        ti.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        ti.type = tarfile.SYMTYPE
        ti.linkname = os.readlink(entry.local)
    elif stat.S_ISREG(st.st_mode):
        ti.size = st.st_size
    else:
        ti.type = tarfile.FIFOTYPE if stat.S_ISFIFO(st.st_mode) else tarfile.REGTYPE
    return ti


def _ustar(ti: tarfile.TarInfo) -> bytes | None:
    """`ti`'s header as tarfile's PAX format writes it where it needs no pax record (an
    ASCII name that fits, numbers that fit), in a few joins instead of tarfile's field by
    field checks: for a tree of small files that was half of a push's CPU here. None for
    any other, which tarfile writes."""
    name, link = ti.name, ti.linkname
    if not (name.isascii() and link.isascii() and len(link) <= 100):
        return None
    if ti.size >= 8**11 or not 0 <= ti.mtime < 8**11 or max(ti.uid, ti.gid) >= 8**7:
        return None
    if ti.type == tarfile.DIRTYPE and not name.endswith("/"):
        name += "/"
    if len(name) > 100:
        return None  # a pax record holds it
    head = b"".join(
        (
            name.encode().ljust(100, b"\0"),
            b"%07o\0%07o\0%07o\0%011o\0%011o\0"
            % (ti.mode & 0o7777, ti.uid, ti.gid, ti.size, int(ti.mtime)),
            b"        ",
            ti.type,
            link.encode().ljust(100, b"\0"),
            b"ustar\x0000",
            bytes(247),  # owner and group names, device numbers, name prefix: none
        )
    )
    return b"%s%06o\0 %s" % (head[:148], sum(head), head[156:])


def _tar_pieces(plan: PushPlan, uid: int, gid: int, progress: Progress | None) -> Iterator[bytes]:
    for entry in plan.entries:
        ti = _tarinfo(entry, uid, gid)
        if ti.isreg() and not stat.S_ISREG(entry.st.st_mode):
            continue  # sockets, devices: nothing a project needs
        yield _ustar(ti) or ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        if not ti.isreg():
            continue
        left = ti.size
        with open(entry.local, "rb") as f:
            while left > 0:
                data = f.read(min(_READ, left))
                if not data:
                    break  # the file shrank while we read it: pad with zeros below
                left -= len(data)
                yield data
                if progress:
                    progress(len(data))
        if left:
            yield bytes(left)
        if pad := (-ti.size) % BLOCK:
            yield bytes(pad)
    yield bytes(2 * BLOCK)


def tar_stream(
    plan: PushPlan, uid: int = 1000, gid: int = 1000, progress: Progress | None = None
) -> Iterator[bytes]:
    """Yield a tar archive of the plan in ~1 MiB pieces: memory stays flat for any tree,
    and a tree of small files does not become thousands of tiny HTTP chunks."""
    buf = bytearray()
    for piece in _tar_pieces(plan, uid, gid, progress):
        if len(piece) >= _READ:  # a big file's data: as read, not copied again
            if buf:
                yield bytes(buf)
                buf.clear()
            yield piece
            continue
        buf += piece
        if len(buf) >= _READ:
            yield bytes(buf)
            buf.clear()
    if buf:
        yield bytes(buf)


class _IterReader:
    """File-like view of an iterator of byte chunks, for tarfile's stream mode."""

    def __init__(self, chunks: Iterator[bytes], progress: Progress | None) -> None:
        self._chunks = chunks
        self._buf = b""
        self._progress = progress

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            try:
                data = next(self._chunks)
            except StopIteration:
                break
            if self._progress:
                self._progress(len(data))
            self._buf += data
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


# -- pull: a hostile tar, written below one folder and nowhere else -------------------
#
# Every path below is a tuple of names relative to the folder that holds the target, so
# `(top,)` is the target itself and `(top, "a", "b")` is `target/a/b`. A pull is written
# aside first, under a fresh name beside the target, and moved into place when it is
# whole: a refused or broken archive leaves the target as it was.

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY
# POSIX (Linux, macOS) has the *at calls: folders are held as fds opened without following
# links, so nothing can be swapped under a path between a check and a write. Windows has
# none of them; there each folder's path is lstat-checked component by component.
_AT_CALLS = (os.open, os.stat, os.mkdir, os.rmdir, os.unlink, os.symlink, os.link, os.rename)
_AT = set(_AT_CALLS) <= os.supports_dir_fd and {os.chmod, os.utime} <= os.supports_fd
_MAX_DEPTH = 256  # folders a member may sit in; no project is deeper, a hostile tar may be
_NAME_MAX = 255  # bytes in one name (NAME_MAX on Linux and macOS)
_LINK_MAX = 4095  # bytes in a link's target (PATH_MAX less its NUL)
_SPECIAL = {
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a fifo",
}

Parts = tuple[str, ...]


class _Refusal(Exception):
    """Why one member is refused; `_Extraction.add` names the member."""


def _split_member(name: str) -> list[str]:
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise _Refusal("absolute or malformed path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise _Refusal("it leaves the destination")
    if len(parts) > _MAX_DEPTH:
        raise _Refusal(f"nested deeper than {_MAX_DEPTH} folders")
    if any(len(os.fsencode(p)) > _NAME_MAX for p in parts):
        raise _Refusal(f"a name longer than {_NAME_MAX} bytes")
    return parts


def _stamp(handle: int | str, mode: int, mtime: float) -> None:
    # Mode bits are kept, setuid/setgid/sticky are not: the box does not get to plant them.
    os.chmod(handle, mode & 0o777)
    with contextlib.suppress(OverflowError, ValueError):  # a nonsense time is not worth a failure
        os.utime(handle, (mtime, mtime))


class _Dir:
    """One folder of the destination, reached without following a link: an fd where the
    platform has the *at calls, else its checked path (`handle` is whichever it is)."""

    def __init__(self, path: str, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @property
    def handle(self) -> int | str:
        return self.path if self.fd is None else self.fd

    def at(self, name: str) -> str:
        return name if self.fd is not None else os.path.join(self.path, name)

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(self.at(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        return sorted(os.listdir(self.handle))

    def child(self, name: str) -> _Dir:
        """The subfolder `name`; OSError when it is missing, a link or not a folder."""
        path = os.path.join(self.path, name)
        if self.fd is not None:
            return _Dir(path, os.open(name, _DIR_FLAGS, dir_fd=self.fd))
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise NotADirectoryError(path)
        return _Dir(path, None)

    def dup(self) -> _Dir:
        return _Dir(self.path, None if self.fd is None else os.dup(self.fd))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Destination:
    """The folder that holds the target, and the walks inside it, opening folders without
    following links."""

    def __init__(self, parent: Path) -> None:
        try:
            fd = os.open(parent, _DIR_FLAGS & ~_NOFOLLOW) if _AT else None  # the user's own path
            if fd is None and not stat.S_ISDIR(os.stat(parent).st_mode):
                raise NotADirectoryError(str(parent))
        except FileNotFoundError:
            raise NotFound(f"no such folder: {parent}") from None
        except NotADirectoryError:
            raise InvalidRequest(f"{parent} is not a folder") from None
        except OSError as exc:
            raise PaddockError(f"cannot write in {parent}: {exc.strerror or exc}") from None
        self.base = _Dir(str(parent), fd)

    def close(self) -> None:
        self.base.close()

    def local(self, parts: Parts) -> str:
        return os.path.join(self.base.path, *parts)

    def open_dir(self, parts: Parts, *, create: bool = False) -> _Dir:
        """The folder at `parts` (the caller closes it). `create` makes missing folders,
        as tar does when an archive omits them."""
        d = self.base.dup()
        try:
            for i, name in enumerate(parts):
                if create and d.lstat(name) is None:
                    os.mkdir(d.at(name), 0o700, dir_fd=d.fd)
                try:
                    child = d.child(name)
                except OSError:
                    raise self._why_not_a_dir(d, name, parts[: i + 1]) from None
                d.close()
                d = child
            return d
        except BaseException:
            d.close()
            raise

    def _why_not_a_dir(self, d: _Dir, name: str, parts: Parts) -> Exception:
        st = d.lstat(name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            return _Refusal(f"it goes through the symlink {self.local(parts)}")
        if st is not None:
            return _Refusal(f"{self.local(parts)} is not a folder")
        return FileNotFoundError(self.local(parts))


class _Extraction:
    """One pull: members are written one by one under `(top,)`, a fresh folder no one else
    writes in, refusing anything that could put something outside it. Links are kept as
    links, wherever they point (a project's `.venv/bin/python3 -> /usr/bin/python3`), and
    nothing is ever written through one. The first refusal ends the pull."""

    def __init__(self, dest: _Destination, top: str, root_name: str, skip: Skip) -> None:
        self.dest = dest
        self.top = top
        self.root_name = root_name
        self.skip = skip
        self.files: set[Parts] = set()  # regular files this pull wrote: hard link sources
        self.dirs: list[tuple[Parts, int, float]] = []
        self._parent: tuple[Parts, _Dir] | None = None  # the last member's folder, kept open

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        try:
            parts = self._parts(member.name)
            if len(parts) > 1 and self.skip("/".join(parts[1:]) + "/" * member.isdir()):
                return
            folder = self._folder(parts[:-1])
            self._check(parts, member)
            if folder.lstat(parts[-1]) is not None and not member.isdir():
                raise Conflict(f"the box sent {member.name} twice")
            self._write(folder, parts, tar, member)
        except _Refusal as exc:
            what = "symlink" if member.issym() else "archive member"
            arrow = f" -> {member.linkname}" if member.issym() else ""
            raise InvalidRequest(f"refusing {what} {member.name}{arrow}: {exc}") from None
        except OSError as exc:
            raise PaddockError(f"cannot write {member.name}: {exc.strerror or exc}") from exc

    def _parts(self, name: str) -> Parts:
        parts = _split_member(name)
        if parts[0] != self.root_name:
            raise _Refusal(f"outside {self.root_name}")
        return (self.top, *parts[1:])

    def _folder(self, parts: Parts) -> _Dir:
        if self._parent is None or self._parent[0] != parts:
            opened = self.dest.open_dir(parts, create=True)
            self.close()
            self._parent = (parts, opened)
        return self._parent[1]

    def _check(self, parts: Parts, member: tarfile.TarInfo) -> None:
        if member.type in _SPECIAL:
            raise _Refusal(f"{_SPECIAL[member.type]}; pull writes only files, folders and links")
        if (member.issym() or member.islnk()) and len(parts) == 1:
            raise _Refusal("it is a link in the box; pull the path it points to")
        if member.issym():
            target = member.linkname
            if not target or "\x00" in target or len(os.fsencode(target)) > _LINK_MAX:
                raise _Refusal("an empty, malformed or overlong link target")
        elif not (member.isdir() or member.isreg() or member.islnk()):
            raise _Refusal("not a file, folder or link")

    def _write(
        self, folder: _Dir, parts: Parts, tar: tarfile.TarFile, member: tarfile.TarInfo
    ) -> None:
        name = parts[-1]
        if member.isdir():
            if folder.lstat(name) is None:
                os.mkdir(folder.at(name), 0o700, dir_fd=folder.fd)
            self.dirs.append((parts, member.mode, member.mtime))
        elif member.issym():
            os.symlink(member.linkname, folder.at(name), dir_fd=folder.fd)
        elif member.islnk():
            self._hard_link(folder, parts, member.linkname)
        else:
            _write_file(folder, name, tar, member)
            self.files.add(parts)

    def _hard_link(self, folder: _Dir, parts: Parts, linkname: str) -> None:
        try:
            source = self._parts(linkname)
        except _Refusal:
            raise _Refusal(f"hard link to {linkname}, outside the destination") from None
        if source not in self.files:
            raise _Refusal(f"hard link to {linkname}, which is not a file this pull wrote")
        with self.dest.open_dir(source[:-1]) as src:
            st = src.lstat(source[-1])
            if st is None or not stat.S_ISREG(st.st_mode):
                raise _Refusal(f"hard link to {linkname}, which is no longer a file")
            # follow_symlinks=False: link what was checked, never where a link points.
            os.link(
                src.at(source[-1]),
                folder.at(parts[-1]),
                src_dir_fd=src.fd,
                dst_dir_fd=folder.fd,
                follow_symlinks=not _AT,
            )
        self.files.add(parts)

    def stamp_dirs(self) -> None:
        # Last, deepest first: a read-only folder must not stop its own extraction.
        for parts, mode, mtime in reversed(self.dirs):
            with self.dest.open_dir(parts) as d:
                _stamp(d.handle, mode, mtime)

    def close(self) -> None:
        if self._parent is not None:
            self._parent[1].close()
            self._parent = None


def _write_file(folder: _Dir, name: str, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    src = tar.extractfile(member)
    assert src is not None
    fd = os.open(folder.at(name), _FILE_FLAGS, 0o600, dir_fd=folder.fd)
    with os.fdopen(fd, "wb") as out:
        while data := src.read(_READ):
            out.write(data)
        out.flush()
        if folder.fd is not None:
            _stamp(out.fileno(), member.mode, member.mtime)
    if folder.fd is None:  # no fchmod/futimes on this platform: by the path just checked
        _stamp(folder.at(name), member.mode, member.mtime)


Skip = Callable[[str], bool]


def _skipper(exclude: Sequence[str]) -> Skip:
    """Whether a path below the pulled folder (a folder's with a trailing /) is left out,
    by gitignore rules as push's `exclude`."""
    if not exclude:
        return lambda rel: False
    spec = _spec(exclude)
    return lambda rel: bool(spec.match_file(rel))


def extract_stream(
    chunks: Iterator[bytes],
    root_name: str,
    target: Path,
    *,
    force: bool = False,
    merge: bool = False,
    exclude: Sequence[str] = (),
    progress: Progress | None = None,
) -> None:
    """Extract a tar stream whose first component is `root_name` as `target`.

    The stream comes from a box and is hostile: a member that would be written outside
    `target` or through a link, a device or a fifo fails the pull with InvalidRequest
    naming it. Links are kept as the box has them. All is written aside and moved into
    place once whole, so a failed pull leaves `target` as it was. Raises Conflict before
    reading when `target` exists and `force` is false, unless `merge`: then `target` is an
    existing folder that the contents go into, and a file already there raises Conflict
    (without `force`) before anything is moved. `exclude`: gitignore patterns, matched
    below the pulled folder.
    """
    if (target.is_symlink() or target.exists()) and not (force or merge):
        raise Conflict(f"{target} already exists; use --force to overwrite")
    dest = _Destination(target.parent)
    aside = f".{target.name[:200]}.pull-{secrets.token_hex(4)}"
    try:
        job = _Extraction(dest, aside, root_name, _skipper(exclude))
        try:
            _extract_all(job, _IterReader(chunks, progress))
        finally:
            job.close()
        if dest.base.lstat(aside) is None:
            raise InvalidRequest("the box sent an empty archive")
        job.stamp_dirs()
        _Settle(dest, force, merge).move(dest.base, aside, dest.base, target.name, top=True)
    finally:
        with contextlib.suppress(OSError):  # never in place of the error that ended the pull
            _remove(dest.base, aside)
        dest.close()


def _extract_all(job: _Extraction, stream: _IterReader) -> None:
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                job.add(tar, member)
    except tarfile.TarError as exc:
        raise InvalidRequest(f"the box sent a broken archive: {exc}") from None


class _Settle:
    """Moves a finished pull from aside into place: all of it at once where the target
    is new; into an existing folder, every conflict checked before anything moves."""

    def __init__(self, dest: _Destination, force: bool, merge: bool) -> None:
        self.dest, self.force, self.merge = dest, force, merge

    def move(self, src: _Dir, name: str, dst: _Dir, to: str, *, top: bool = False) -> None:
        there = dst.lstat(to)
        if there is None:
            _rename(src, name, dst, to)
            return
        if top:
            self._check(src, name, dst, to, there)
        here = src.lstat(name)
        assert here is not None
        if stat.S_ISDIR(here.st_mode) and stat.S_ISDIR(there.st_mode):
            with src.child(name) as inner, dst.child(to) as into:
                for child in inner.names():
                    self.move(inner, child, into, child)
                if not (top and self.merge):  # a folder merged into keeps its own mode
                    _stamp(into.handle, here.st_mode, here.st_mtime)
            return
        _remove(dst, to)
        _rename(src, name, dst, to)

    def _check(self, src: _Dir, name: str, dst: _Dir, to: str, there: os.stat_result) -> None:
        here = src.lstat(name)
        assert here is not None
        if stat.S_ISDIR(here.st_mode) and stat.S_ISDIR(there.st_mode):
            with src.child(name) as inner, dst.child(to) as into:
                for child in inner.names():
                    found = into.lstat(child)
                    if found is not None:
                        self._check(inner, child, into, child, found)
            return
        where = os.path.join(dst.path, to)
        if stat.S_ISDIR(there.st_mode):
            raise Conflict(f"{where} is a directory; it would be replaced by a file")
        if not self.force:
            raise Conflict(f"{where} already exists; use --force to overwrite")


def _rename(src: _Dir, name: str, dst: _Dir, to: str) -> None:
    os.rename(src.at(name), dst.at(to), src_dir_fd=src.fd, dst_dir_fd=dst.fd)


def _remove(folder: _Dir, name: str) -> None:
    """Delete `name` in `folder` and all below it, following no link."""
    st = folder.lstat(name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(folder.at(name), dir_fd=folder.fd)
        return
    with folder.child(name) as inner:
        os.chmod(inner.handle, 0o700)  # a read-only folder from the box is still emptied
        for child in inner.names():
            _remove(inner, child)
    os.rmdir(folder.at(name), dir_fd=folder.fd)
