"""File owners as the box sees them. Under the user-namespace remap the engine reports host
ids (box uid 1000 is host uid 201000 when the range starts at 200000); the files API shows
the box's own, in stats and in the headers of the tar streams it sends."""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO

# Docker maps a box's ids 0..65535 onto the subordinate range that starts at the base.
BOX_IDS = 65536
# What a box sees for a host id outside its range: the kernel's overflowuid (`nobody`).
OVERFLOW_ID = 65534

_BLOCK = tarfile.BLOCKSIZE
_PIECE = 1024 * 1024
# Owner fields a PAX header may carry; they would override the rewritten ustar fields.
_OWNER_KEYS = ("uid", "gid", "uname", "gname")


@dataclass(frozen=True)
class IdMap:
    """The engine's remap: box id N is host id `base + N`."""

    base: int

    def to_box(self, host_id: int) -> int:
        inside = host_id - self.base
        return inside if 0 <= inside < BOX_IDS else OVERFLOW_ID


def first_member(tar: tarfile.TarFile) -> tarfile.TarInfo:
    """The archive's top entry (the engine's archive of a path always has one)."""
    member = tar.next()
    if member is None:
        raise tarfile.ReadError("the engine sent an empty archive")
    return member


def box_owned(tar: tarfile.TarFile, first: tarfile.TarInfo, ids: IdMap | None) -> Iterator[bytes]:
    """The archive `tar` (opened in stream mode, its first member already read) again, in
    ~1 MiB pieces, with every owner as the box sees it (unchanged when `ids` is None).
    Names, modes, times, links and data pass through as they are; uname/gname go, since
    the engine's names are the host's."""
    buf = bytearray()
    member: tarfile.TarInfo | None = first
    while member is not None:
        for piece in _member(tar, member, ids):
            buf += piece
            if len(buf) >= _PIECE:
                yield bytes(buf)
                buf.clear()
        member = tar.next()
    buf += bytes(2 * _BLOCK)  # the end-of-archive marker
    yield bytes(buf)


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo, ids: IdMap | None) -> Iterator[bytes]:
    if ids is not None:
        member.uid, member.gid = ids.to_box(member.uid), ids.to_box(member.gid)
        member.uname = member.gname = ""
        member.pax_headers = _without(member.pax_headers, lambda key: key in _OWNER_KEYS)
    if not member.isreg():
        yield member.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        return  # folders, links, devices: a header and nothing else
    if member.issparse():  # its data is read back whole, holes as zeros
        member.type = tarfile.REGTYPE
        member.pax_headers = _without(member.pax_headers, lambda key: key.startswith("GNU.sparse."))
    yield member.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    data: IO[bytes] | None = tar.extractfile(member)
    assert data is not None  # a regular member always has data (maybe empty)
    while chunk := data.read(_PIECE):
        yield chunk
    if pad := (-member.size) % _BLOCK:
        yield bytes(pad)


def _without(headers: Mapping[str, str], drop: Callable[[str], bool]) -> dict[str, str]:
    return {key: value for key, value in headers.items() if not drop(key)}
