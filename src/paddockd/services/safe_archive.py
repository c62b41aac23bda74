"""A box's tar of a folder, rewritten as a browser download (zip or tar) that cannot lead
outside that folder when it is unpacked, with whatever tool the person has.

These are `paddock pull`'s rules (src/paddock/_archive.py) applied the other way round:
pull checks on the client and fails on the first bad member; a download is unpacked by
tools we do not control, so paddockd checks on the way out and leaves bad members out
(the person gets everything else). Kept: folders and regular files whose names stay under
the top folder (no absolute name, no `..` component, with `\\` counted as a separator for
the unpackers that do); symlinks whose target is relative and climbs, if at all, only at
its start and never above the top folder; in a tar, hard links to a file kept before.
Left out: every other link, devices, fifos, and in a zip any hard link (a zip has none,
and the data it points to has gone by in the stream). Modes lose setuid, setgid, sticky.

Why "climbs only at its start" is enough: a target that first descends and then climbs
(`a/../..`) climbs from wherever `a` leads, which may be higher than `a` itself if `a` is
a link; a target that climbs first starts from the link's own folder, which is a real
folder of the archive, so counting the `..` against that folder's depth is exact, and
every later step goes down (through links that obey the same rule).
"""

from __future__ import annotations

import stat
import tarfile
import time
import zipfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import IO, Literal

ArchiveFormat = Literal["zip", "tar"]
_PIECE = 1 << 20
_PERMS = 0o777


@dataclass
class Tally:
    """What the rewrite kept and left out (by member name), for the caller to log."""

    kept: int = 0
    left_out: list[str] = field(default_factory=list)


def _parts(name: str) -> list[str] | None:
    """The member name's components, or None if it is absolute or climbs anywhere."""
    if not name or name.startswith(("/", "\\")):
        return None
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return parts


def link_stays_inside(member_parts: list[str], target: str) -> bool:
    """Whether a symlink at `member_parts` (the top folder first) pointing at `target`
    resolves inside the top folder, by the rule in this module's docstring."""
    if not target or target.startswith(("/", "\\")) or "\x00" in target:
        return False
    steps = [p for p in target.replace("\\", "/").split("/") if p not in ("", ".")]
    climbs = 0
    while climbs < len(steps) and steps[climbs] == "..":
        climbs += 1
    if ".." in steps[climbs:]:
        return False
    # The link's folder is member_parts[:-1]; the top folder is member_parts[:1].
    return climbs <= len(member_parts) - 2


class _Collector:
    """A write-only file for zipfile and tarfile; the rewrite hands its bytes on in pieces.
    No tell or seek: zipfile then writes data descriptors, as a stream needs."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def write(self, data: bytes) -> int:
        self._buf += data
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def take(self, everything: bool = False) -> Iterator[bytes]:
        if self._buf and (everything or len(self._buf) >= _PIECE):
            yield bytes(self._buf)
            self._buf.clear()


def _zip_info(name: str, member: tarfile.TarInfo, kind: int) -> zipfile.ZipInfo:
    stamp = time.localtime(max(member.mtime, 315532800))  # a zip's clock starts in 1980
    info = zipfile.ZipInfo(name, date_time=stamp[:6])
    info.external_attr = (kind | (member.mode & _PERMS)) << 16
    info.create_system = 3  # Unix: unpackers read the mode (and a link) from external_attr
    info.compress_type = zipfile.ZIP_DEFLATED  # self-delimiting, for unpackers that stream
    if kind == stat.S_IFDIR:
        info.external_attr |= 0x10  # MS-DOS directory flag
    return info


def rewrite(source: IO[bytes], fmt: ArchiveFormat, tally: Tally) -> Generator[bytes, None, None]:
    """The safe archive of the tar read from `source` (stream mode), in ~1 MiB pieces.
    Blocking (it reads `source`): drive it from a worker thread."""
    kept_files: set[str] = set()
    with tarfile.open(fileobj=source, mode="r|", encoding="utf-8", errors="surrogateescape") as tar:
        members = _safe_members(tar, fmt, tally, kept_files)
        if fmt == "zip":
            yield from _zip(tar, members)
        else:
            yield from _tar(tar, members)


def _safe_members(
    tar: tarfile.TarFile, fmt: ArchiveFormat, tally: Tally, kept_files: set[str]
) -> Iterator[tuple[tarfile.TarInfo, str]]:
    top = None
    for member in tar:
        parts = _parts(member.name)
        top = top or (parts[0] if parts else None)
        if (
            parts is not None
            and parts[0] == top
            and (
                member.isdir()
                or member.isreg()
                or (member.issym() and link_stays_inside(parts, member.linkname))
                or (member.islnk() and fmt == "tar" and _joined(member.linkname) in kept_files)
            )
        ):
            name = "/".join(parts)
            tally.kept += 1
            if member.isreg():
                kept_files.add(name)
            yield member, name
        else:
            tally.left_out.append(member.name)


def _joined(name: str) -> str:
    return "/".join(_parts(name) or ())


def _zip(tar: tarfile.TarFile, members: Iterator[tuple[tarfile.TarInfo, str]]) -> Iterator[bytes]:
    out = _Collector()
    # Level 1: most of deflate's gain for a fraction of its CPU (the box server's CPU).
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for member, name in members:
            if member.isdir():
                zf.writestr(_zip_info(name + "/", member, stat.S_IFDIR), b"")
            elif member.issym():
                zf.writestr(_zip_info(name, member, stat.S_IFLNK), member.linkname.encode())
            else:
                info = _zip_info(name, member, stat.S_IFREG)
                info.file_size = member.size  # decides zip64 up front (no seeking back)
                data = tar.extractfile(member)
                assert data is not None  # a regular member always has data (maybe empty)
                with zf.open(info, "w") as dst:
                    while piece := data.read(_PIECE):
                        dst.write(piece)
                        yield from out.take()
            yield from out.take()
    yield from out.take(everything=True)  # the central directory, written on closing


def _tar(tar: tarfile.TarFile, members: Iterator[tuple[tarfile.TarInfo, str]]) -> Iterator[bytes]:
    out = _Collector()
    for member, name in members:
        copy = tarfile.TarInfo(name)
        copy.type, copy.mode, copy.mtime = member.type, member.mode & _PERMS, member.mtime
        copy.uid, copy.gid = member.uid, member.gid
        if member.issym():
            copy.linkname = member.linkname
        elif member.islnk():
            copy.linkname = _joined(member.linkname)
        elif member.isreg():
            copy.size = member.size
        out.write(copy.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        if member.isreg():
            data = tar.extractfile(member)
            assert data is not None
            while piece := data.read(_PIECE):
                out.write(piece)
                yield from out.take()
            out.write(bytes(-member.size % tarfile.BLOCKSIZE))
        yield from out.take()
    out.write(bytes(2 * tarfile.BLOCKSIZE))  # the end-of-archive marker
    yield from out.take(everything=True)


def first_file(source: IO[bytes]) -> Generator[bytes, None, None]:
    """The data of the archive's first member, a regular file (the engine's archive of a
    file), in ~1 MiB pieces. Blocking: drive it from a worker thread."""
    with tarfile.open(fileobj=source, mode="r|", encoding="utf-8", errors="surrogateescape") as tar:
        member = tar.next()
        if member is None or not member.isreg():
            raise tarfile.ReadError("the archive does not start with a file")
        data = tar.extractfile(member)
        assert data is not None
        while piece := data.read(_PIECE):
            yield piece
