"""A template build's context (the tar the client sent, kept on the server while the
template lives) read for `COPY`: the members a step names, as a tar laid out where the step
puts them in the box (Docker's COPY rules: a folder's contents go into the destination, a
file into it when it is a folder (`dest/`, or several sources), else it is the file's new
name). Read only: nothing of the context is ever unpacked on the host, and its names are
checked as pull checks a box's (no absolute name, no `..`)."""

from __future__ import annotations

import fnmatch
import io
import posixpath
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..domain.dockerfile import Copy
from ..domain.errors import InvalidRequest
from .safe_archive import _parts, link_stays_inside

MAX_MEMBERS = 200_000
_PIECE = 1 << 20


def dockerfile_in(context: Path, path: str) -> str:
    """The Dockerfile's text, from the context (at most 256 KiB)."""
    parts = _parts(path)
    if parts is None:
        raise InvalidRequest(f"{path!r}: the Dockerfile is a path inside the context")
    wanted = "/".join(parts)
    with tarfile.open(context) as tar:
        for member in _members(tar):
            if _name(member) == wanted and member.isfile():
                if member.size > 256 * 1024:
                    raise InvalidRequest(f"{path} is over 256 KiB: not a Dockerfile")
                data = tar.extractfile(member)
                assert data is not None
                return data.read().decode("utf-8", errors="replace")
    raise InvalidRequest(
        f"no {path} in the build's context (give the Dockerfile with -f, or put one there)"
    )


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    for count, member in enumerate(tar):
        if count >= MAX_MEMBERS:
            raise InvalidRequest(f"the build's context has over {MAX_MEMBERS} files")
        if _parts(member.name) is not None:
            yield member


def _name(member: tarfile.TarInfo) -> str:
    parts = _parts(member.name)
    assert parts is not None
    return "/".join(parts)


def _owner(owner: str | None) -> tuple[int, int]:
    """--chown as ids: names a box knows by heart (root, abc) or numbers."""
    known = {"root": 0, "abc": 1000}
    if owner is None:
        return 0, 0
    user, _, group = owner.partition(":")
    group = group or user
    try:
        return (
            known[user] if user in known else int(user),
            known[group] if group in known else int(group),
        )
    except ValueError:
        raise InvalidRequest(
            f"--chown={owner}: use root, abc or numeric ids (uid:gid) in a template"
        ) from None


def copy_tar(context: Path, step: Copy, out: IO[bytes]) -> int:
    """Write to `out` the tar that puts `step`'s sources where it says (names relative to
    the box's /); the number of members written."""
    uid, gid = _owner(step.owner)
    written = 0
    with tarfile.open(context) as source, tarfile.open(fileobj=out, mode="w|") as target:
        members = list(_members(source))
        names = {_name(m): m for m in members}
        many = len(step.sources) > 1 or any(any(c in s for c in "*?[") for s in step.sources)
        into_folder = many or step.dest.endswith("/")
        for pattern in step.sources:
            clean = posixpath.normpath(pattern)
            clean = "" if clean == "." else clean.removeprefix("./")
            globbed = any(c in clean for c in "*?[")
            tops = [n for n in names if fnmatch.fnmatchcase(n, clean)] if globbed else [clean]
            found_any = False
            for top in tops:
                for member in members:
                    name = _name(member)
                    inside = not top or name == top or name.startswith(top + "/")
                    if not inside:
                        continue
                    found_any = True
                    rel = name if not top else name[len(top) :].lstrip("/")
                    is_top_file = name == top and not member.isdir()
                    if is_top_file:
                        dest = (
                            posixpath.join(step.dest, posixpath.basename(top))
                            if into_folder
                            else step.dest
                        )
                    else:
                        dest = posixpath.join(step.dest, rel) if rel else step.dest.rstrip("/")
                    if not _add(source, target, member, dest, uid, gid, step.mode, top):
                        continue
                    written += 1
            if not found_any:
                raise InvalidRequest(
                    f"Dockerfile line {step.line}: COPY {pattern}: no such file in the context"
                )
    return written


def _add(
    source: tarfile.TarFile,
    target: tarfile.TarFile,
    member: tarfile.TarInfo,
    dest: str,
    uid: int,
    gid: int,
    mode: int | None,
    top: str,
) -> bool:
    name = dest.lstrip("/")
    if not name:
        return False
    info = tarfile.TarInfo(name)
    info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
    info.mtime = member.mtime
    if member.isdir():
        info.type, info.mode = tarfile.DIRTYPE, mode if mode is not None else member.mode & 0o777
        target.addfile(info)
    elif member.isfile():
        info.size, info.mode = member.size, mode if mode is not None else member.mode & 0o777
        data = source.extractfile(member)
        target.addfile(info, data if data is not None else io.BytesIO())
    elif member.issym():
        parts = _parts(member.name) or []
        if not link_stays_inside(parts, member.linkname):
            return False  # a link out of the context is not the context's to give
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, member.linkname, 0o777
        target.addfile(info)
    else:
        return False  # devices, fifos, hard links: not a build's files
    return True


def chunks_of(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while piece := f.read(_PIECE):
            yield piece
