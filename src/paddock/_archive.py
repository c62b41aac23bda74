"""Tar streams for push (built lazily from local files) and pull (extracted defensively).

A box is untrusted: `extract_stream` never writes outside its destination. It rejects
absolute and `..` member names, links that point outside the destination, and it never
writes through a symlink already on disk (one left by an earlier pull included).
"""

from __future__ import annotations

import os
import posixpath
import stat
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._exceptions import Conflict, InvalidRequest, NotFound

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


def plan_push(sources: list[Path], excludes: list[str], into_dir: bool) -> PushPlan:
    """Walk the sources once. A lone directory is pushed as its contents (`cp -rT`); with
    several sources, or `into_dir`, each goes in under its own base name."""
    plan = PushPlan()
    for src in sources:
        try:
            st = src.lstat()
        except FileNotFoundError:
            raise NotFound(f"no such file or directory: {src}") from None
        base = "" if (stat.S_ISDIR(st.st_mode) and not into_dir) else src.resolve().name or "root"
        if not stat.S_ISDIR(st.st_mode):
            _add(plan, src, base or src.name, st)
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


def _tar_pieces(plan: PushPlan, uid: int, gid: int, progress: Progress | None) -> Iterator[bytes]:
    for entry in plan.entries:
        ti = _tarinfo(entry, uid, gid)
        if ti.isreg() and not stat.S_ISREG(entry.st.st_mode):
            continue  # sockets, devices: nothing a project needs
        yield ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
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


def pull_target(dest: Path, root_name: str) -> Path:
    """Like `cp`: into an existing directory under the source's name, else as `dest` itself."""
    return dest / root_name if dest.is_dir() and not dest.is_symlink() else dest


def _split_member(name: str) -> list[str]:
    if name.startswith("/") or "\\" in name or "\x00" in name:
        raise InvalidRequest(f"refusing archive member {name!r}: absolute or malformed path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise InvalidRequest(f"refusing archive member {name!r}: it leaves the destination")
    return parts


def _check_parents(top: Path, parts: list[str]) -> Path:
    """Return the path for `parts` below `top`, after proving no existing component of it
    is a symlink or a non-directory (so nothing can be written through a link)."""
    path = top
    for part in parts[:-1]:
        path = path / part
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise InvalidRequest(f"refusing to write through the symlink {path}")
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidRequest(f"{path} is not a directory")
    return path / parts[-1]


def _link_inside(parts: list[str], target: str) -> bool:
    if not target or target.startswith("/") or "\x00" in target:
        return False
    # Resolved lexically against the link's own directory; must stay below the root entry.
    resolved = posixpath.normpath(posixpath.join(*parts[:-1], target))
    return resolved != ".." and not resolved.startswith("../")


def extract_stream(
    chunks: Iterator[bytes],
    root_name: str,
    target: Path,
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> list[str]:
    """Extract a tar stream whose first component is `root_name` as `target`.

    Returns warnings (skipped special files). Raises before writing when `target` exists
    and `force` is false.
    """
    if target.is_symlink() or target.exists():
        if not force:
            raise Conflict(f"{target} already exists; use --force to overwrite")
        if target.is_symlink() or not target.is_dir():
            target.unlink()
    warnings: list[str] = []
    written: dict[str, Path] = {}
    dirs: list[tuple[Path, tarfile.TarInfo]] = []
    with tarfile.open(fileobj=_IterReader(chunks, progress), mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            parts = _split_member(member.name)
            if parts[0] != root_name:
                raise InvalidRequest(
                    f"refusing archive member {member.name!r}: outside {root_name}"
                )
            rel = parts[1:]
            path = _check_parents(target.parent, [target.name, *rel])
            if member.issym() or member.islnk():
                if not rel:
                    raise InvalidRequest(
                        f"{root_name} is a symlink in the box; pull the path it points to"
                    )
                if member.issym() and not _link_inside(rel, member.linkname):
                    raise InvalidRequest(
                        f"refusing symlink {member.name} -> {member.linkname}: "
                        "it points outside the destination"
                    )
            _clear(path, member, force)
            if member.isdir():
                path.mkdir(mode=0o700, exist_ok=True)
                dirs.append((path, member))
            elif member.isreg():
                _write_file(path, tar, member)
                written[member.name] = path
            elif member.issym():
                os.symlink(member.linkname, path)
            elif member.islnk():
                source = written.get(member.linkname)
                if source is None:
                    raise InvalidRequest(f"refusing hard link {member.name} -> {member.linkname}")
                os.link(source, path)
            else:
                warnings.append(f"skipped special file {member.name}")
    for path, member in reversed(dirs):
        os.chmod(path, member.mode & 0o777)
        os.utime(path, (member.mtime, member.mtime))
    return warnings


def _clear(path: Path, member: tarfile.TarInfo, force: bool) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode) and member.isdir():
        return
    if not force:
        raise Conflict(f"{path} already exists; use --force to overwrite")
    if stat.S_ISDIR(st.st_mode):
        raise Conflict(f"{path} is a directory; it would be replaced by a file")
    path.unlink()


def _write_file(path: Path, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    src = tar.extractfile(member)
    assert src is not None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o600)
    with os.fdopen(fd, "wb") as out:
        while data := src.read(_READ):
            out.write(data)
    # Mode bits are kept, setuid/setgid/sticky are not: the box does not get to plant them.
    os.chmod(path, member.mode & 0o777)
    os.utime(path, (member.mtime, member.mtime))
