"""Owners as the box sees them: host ids of the remap turned back, tar streams re-headed
without changing anything else."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from paddockd.runtime.idmap import OVERFLOW_ID, IdMap, box_owned, first_member

IDS = IdMap(200000)


@pytest.mark.parametrize(
    ("host", "box"),
    [(200000, 0), (201000, 1000), (265535, 65535), (0, OVERFLOW_ID), (265536, OVERFLOW_ID)],
)
def test_to_box(host: int, box: int) -> None:
    assert IDS.to_box(host) == box


def engine_tar() -> bytes:
    """What the engine sends under the remap: host owners and names, PAX headers."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(name: str, kind: bytes, data: bytes = b"", **fields: object) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data)
            info.uid = info.gid = 201000
            info.uname = info.gname = "host-user"
            for key, value in fields.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data) if data else None)

        add("proj", tarfile.DIRTYPE, mode=0o755)
        add("proj/big.bin", tarfile.REGTYPE, os.urandom(3 * 1024 * 1024 + 7), mode=0o640)
        add("proj/root.txt", tarfile.REGTYPE, b"r", uid=200000, gid=200000)
        add("proj/" + "ü" * 120, tarfile.REGTYPE, b"long name")  # needs a PAX path
        add("proj/link", tarfile.SYMTYPE, linkname="big.bin")
        add("proj/hard", tarfile.LNKTYPE, linkname="proj/root.txt")
        add("proj/empty", tarfile.REGTYPE)
        # An owner too large for the ustar field travels in the PAX header.
        add("proj/huge", tarfile.REGTYPE, b"h", uid=2**32 - 2)
    return buf.getvalue()


def members(data: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return [
            (m, tar.extractfile(m).read() if m.isreg() else None)  # type: ignore[union-attr]
            for m in tar.getmembers()
        ]


def retagged(data: bytes, ids: IdMap | None) -> bytes:
    tar = tarfile.open(fileobj=io.BytesIO(data), mode="r|")  # noqa: SIM115 - read just below
    pieces = list(box_owned(tar, first_member(tar), ids))
    assert max(len(p) for p in pieces) < 2 * 1024 * 1024  # streamed, not gathered
    return b"".join(pieces)


def test_owners_become_the_boxs_and_nothing_else_changes() -> None:
    data = engine_tar()
    before, after = members(data), members(retagged(data, IDS))
    assert [m.name for m, _ in after] == [m.name for m, _ in before]
    owners = {m.name.removeprefix("proj/"): (m.uid, m.gid, m.uname) for m, _ in after}
    assert owners["proj"] == owners["big.bin"] == (1000, 1000, "")
    assert owners["root.txt"] == (0, 0, "")
    assert owners["huge"][0] == OVERFLOW_ID
    for (old, old_data), (new, new_data) in zip(before, after, strict=True):
        assert (new.type, new.mode, new.mtime, new.linkname, new.size) == (
            old.type,
            old.mode,
            old.mtime,
            old.linkname,
            old.size,
        )
        assert new_data == old_data


def test_without_a_remap_the_stream_is_unchanged_in_content() -> None:
    data = engine_tar()
    after = members(retagged(data, None))
    assert {m.uid for m, _ in after} >= {201000, 200000}
    assert [d for _, d in after] == [d for _, d in members(data)]
