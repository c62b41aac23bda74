"""The portable box file: what is written reads back byte for byte, holes kept as holes;
anything changed, cut short, padded, out of bounds or not a box file is refused before
the caller keeps anything, and the data written never exceeds the disk's size."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator

import pytest
import zstandard

from paddockd.services import box_archive
from paddockd.services.box_archive import BadArchive, Manifest

SIZE = 8 << 20
MANIFEST = Manifest(
    name="b", type="small", image="sha256:" + "a" * 64, uid_base=200000, disk_size=SIZE
)


class Disk:
    def __init__(self, size: int, pieces: dict[int, bytes]) -> None:
        self.size, self.pieces = size, pieces

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        yield from sorted(self.pieces.items())


class Sink:
    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.writes = 0

    def write(self, offset: int, data: bytes) -> None:
        self.data[offset : offset + len(data)] = data
        self.writes += len(data)


def _file(manifest: Manifest = MANIFEST, pieces: dict[int, bytes] | None = None) -> bytes:
    disk = Disk(
        manifest.disk_size, pieces if pieces is not None else {0: b"super", 4096: b"x" * 70000}
    )
    return b"".join(box_archive.write(manifest, disk))


def _read(raw: bytes, size: int = SIZE) -> tuple[Manifest, Sink]:
    manifest, extract = box_archive.open_archive(io.BytesIO(raw).read)
    sink = Sink(size)
    extract(sink)
    return manifest, sink


def _plain(parts: list[bytes]) -> bytes:
    """A box file made by hand (its digest computed over what is given)."""
    import hashlib

    body = b"".join(parts)
    return zstandard.ZstdCompressor().compress(body + hashlib.sha256(body).digest())


def _header(manifest: dict[str, object]) -> bytes:
    meta = json.dumps(manifest).encode()
    return box_archive.MAGIC + struct.pack(">I", len(meta)) + meta


END = struct.pack(">QI", box_archive.END, 0)
GOOD = json.loads(MANIFEST.to_json())


def test_a_disk_reads_back_byte_for_byte() -> None:
    manifest, sink = _read(_file())
    assert manifest == MANIFEST
    assert (
        bytes(sink.data[:5]) == b"super" and bytes(sink.data[4096 : 4096 + 70000]) == b"x" * 70000
    )
    assert sink.writes == 5 + 70000  # the holes were not sent
    assert not any(sink.data[5:4096])


def test_a_flipped_byte_anywhere_is_refused() -> None:
    raw = bytearray(_file())
    for at in (len(raw) // 3, len(raw) // 2, len(raw) - 3):
        flipped = bytearray(raw)
        flipped[at] ^= 0x40
        with pytest.raises(BadArchive):
            _read(bytes(flipped))


def test_a_flipped_byte_in_the_data_fails_the_checksum() -> None:
    parts = [_header(GOOD), struct.pack(">QI", 0, 4), b"abcd", END]
    body = b"".join(parts)
    import hashlib

    digest = hashlib.sha256(body.replace(b"abcd", b"abce")).digest()
    raw = zstandard.ZstdCompressor().compress(body + digest)
    with pytest.raises(BadArchive, match="checksum"):
        _read(raw)


@pytest.mark.parametrize("keep", [0.2, 0.5, 0.9, 0.999])
def test_a_cut_file_is_refused(keep: float) -> None:
    raw = _file()
    with pytest.raises(BadArchive):
        _read(raw[: int(len(raw) * keep)])


def test_more_after_the_end_is_refused() -> None:
    with pytest.raises(BadArchive, match="more after its end"):
        _read(_file() + zstandard.ZstdCompressor().compress(b"more"))


def test_not_a_box_file_is_refused() -> None:
    with pytest.raises(BadArchive, match="not zstd"):
        _read(b"PK\x03\x04 a zip, not a box" * 10)
    with pytest.raises(BadArchive, match="does not start as one"):
        _read(zstandard.ZstdCompressor().compress(b"x" * 100))


@pytest.mark.parametrize(
    ("record", "why"),
    [
        (struct.pack(">QI", SIZE - 2, 4) + b"abcd", "outside the disk"),  # past its end
        (struct.pack(">QI", 0, box_archive.MAX_RECORD + 1), "outside the disk"),
        (struct.pack(">QI", 100, 4) + b"abcd" + struct.pack(">QI", 0, 4) + b"abcd", "outside"),
        (struct.pack(">QI", 0, 10) + b"abc", "outside the disk|ends in the middle"),
    ],
)
def test_data_outside_the_disk_or_going_back_is_refused(record: bytes, why: str) -> None:
    # Forward-only records bound what is written by the disk's size, however well a
    # file of zeros compresses.
    with pytest.raises(BadArchive, match=why):
        _read(_plain([_header(GOOD), record, END]))


@pytest.mark.parametrize(
    "change",
    [
        {"format": 2},
        {"name": None},
        {"disk_size": -1},
        {"disk_size": True},
        {"uid_base": "200000"},
        {"drives": [1]},
        {"ttl_action": "explode"},
        {"network": "allow-all"},
    ],
)
def test_a_wrong_manifest_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(BadArchive, match="manifest"):
        _read(_plain([_header({**GOOD, **change}), END]))


def test_a_huge_or_garbled_manifest_is_refused() -> None:
    huge = box_archive.MAGIC + struct.pack(">I", box_archive.MAX_MANIFEST + 1)
    with pytest.raises(BadArchive, match="too large"):
        _read(_plain([huge]))
    garbled = box_archive.MAGIC + struct.pack(">I", 3) + b"{x:"
    with pytest.raises(BadArchive, match="not JSON"):
        _read(_plain([garbled, END]))


def test_unknown_manifest_fields_are_ignored() -> None:
    manifest, _ = _read(_plain([_header({**GOOD, "future": 1}), END]))
    assert manifest == MANIFEST
