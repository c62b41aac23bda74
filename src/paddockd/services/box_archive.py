"""The portable box file of `paddock export` / `paddock import`: one zstd stream of

    MAGIC                              b"PADDOCK-BOX 1\\n"
    u32 n, n bytes of manifest JSON    what the box was (see `Manifest`)
    records: u64 offset, u32 n, n bytes   the disk's data ranges, in order (holes left out)
    u64 END, u32 0                     the end of the records
    32 bytes                           SHA-256 of every byte above

Reading trusts nothing it has not checked: the manifest's size and fields are bounded, a
record must lie inside the disk and after the one before (so the data written can never
exceed the disk's size, however well it compresses), the output of the decompressor is
taken a bounded piece at a time, and the digest and the stream's end are checked before
the caller keeps anything.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Protocol, cast

import zstandard

from ..domain.errors import InvalidRequest

MAGIC = b"PADDOCK-BOX 1\n"
MEDIA_TYPE = "application/vnd.paddock.box+zstd"
END = (1 << 64) - 1
MAX_MANIFEST = 64 << 10
MAX_RECORD = 4 << 20
_U32 = struct.Struct(">I")
_RECORD = struct.Struct(">QI")
_DIGEST = 32
_LEVEL = 3  # ~ the disk's read speed on one core; higher levels save little on binaries
_WINDOW = 1 << 25  # the decompressor's memory bound (the compressor's window is smaller)
_READ = 1 << 20


class BadArchive(InvalidRequest):
    """Not a box file, or one damaged or cut short."""

    def __init__(self, why: str) -> None:
        super().__init__(f"not a whole Paddock box file: {why}", code="bad_archive")


@dataclass(frozen=True)
class Manifest:
    name: str
    type: str
    image: str  # the engine's id of the image the disk's changes lie over
    uid_base: int  # the engine's first host uid for box root: the disk's file owners
    disk_size: int
    ttl: int = 0
    ttl_action: str = "stop"
    network: dict[str, Any] = field(default_factory=dict)
    drives: list[str] = field(default_factory=list)
    agent: str | None = None
    idle_stop: int = 0
    keep: int | None = None
    snapshot: int | None = None  # the snapshot exported; None: the box as it was then
    paddock: str = ""  # the server's version that wrote it
    format: int = 1

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Manifest:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadArchive("its manifest is not JSON") from exc
        if not isinstance(data, dict) or data.get("format") != 1:
            raise BadArchive("its manifest is of an unknown format")
        for key, kinds in _FIELDS.items():
            value = data.get(key)
            if key in _REQUIRED and value is None:
                raise BadArchive(f"its manifest lacks {key!r}")
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
                raise BadArchive(f"its manifest's {key!r} is of the wrong kind")
        if not all(isinstance(d, str) for d in data.get("drives") or ()):
            raise BadArchive("its manifest's drives are not names")
        if data.get("ttl_action", "stop") not in ("stop", "delete") or data["disk_size"] <= 0:
            raise BadArchive("its manifest's TTL action or disk size is wrong")
        return cls(**{k: v for k, v in data.items() if k in _FIELDS and v is not None})


_REQUIRED = ("name", "type", "image", "uid_base", "disk_size")
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "type": str,
    "image": str,
    "uid_base": int,
    "disk_size": int,
    "ttl": int,
    "ttl_action": str,
    "network": dict,
    "drives": list,
    "agent": str,
    "idle_stop": int,
    "keep": int,
    "snapshot": int,
    "paddock": str,
    "format": int,
}


class DiskSource(Protocol):
    size: int

    def chunks(self) -> Iterator[tuple[int, bytes]]: ...


class DiskSink(Protocol):
    def write(self, offset: int, data: bytes) -> None: ...


def write(manifest: Manifest, disk: DiskSource) -> Iterator[bytes]:
    """The box file, compressed, a piece at a time."""
    digest = hashlib.sha256()
    compressor = zstandard.ZstdCompressor(level=_LEVEL).compressobj()

    def out(raw: bytes) -> bytes:
        digest.update(raw)
        return compressor.compress(raw)

    meta = manifest.to_json()
    # The header goes out at once: an import checks it before the disk is sent.
    head = out(MAGIC + _U32.pack(len(meta)) + meta)
    yield head + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    for offset, data in disk.chunks():
        if piece := out(_RECORD.pack(offset, len(data)) + data):
            yield piece
    yield out(_RECORD.pack(END, 0)) + compressor.compress(digest.digest()) + compressor.flush()


class _Plain:
    """The decompressed stream, read exactly and hashed as it goes."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._reader = zstandard.ZstdDecompressor(max_window_size=_WINDOW).stream_reader(
            cast("IO[bytes]", _Source(read)), read_size=_READ, read_across_frames=True
        )
        self.digest = hashlib.sha256()

    def exactly(self, n: int, what: str, hashed: bool = True) -> bytes:
        parts, left = [], n
        while left:
            try:
                part = self._reader.read(min(left, _READ))
            except zstandard.ZstdError as exc:
                raise BadArchive(f"it is not zstd data or is damaged ({exc})") from exc
            if not part:
                raise BadArchive(f"it ends in the middle of {what}")
            parts.append(part)
            left -= len(part)
        data = b"".join(parts)
        if hashed:
            self.digest.update(data)
        return data

    def at_end(self) -> bool:
        try:
            return self._reader.read(1) == b""
        except zstandard.ZstdError:
            return False


class _Source:
    """A file-like object over `read(n)`, for the decompressor."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read


def read_manifest(plain: _Plain) -> Manifest:
    if plain.exactly(len(MAGIC), "its header") != MAGIC:
        raise BadArchive("it does not start as one")
    (size,) = _U32.unpack(plain.exactly(_U32.size, "its header"))
    if size > MAX_MANIFEST:
        raise BadArchive("its manifest is too large")
    return Manifest.from_json(plain.exactly(size, "its manifest"))


def open_archive(read: Callable[[int], bytes]) -> tuple[Manifest, Callable[[DiskSink], None]]:
    """The file's manifest, and the function that then writes its disk to a sink (raising
    BadArchive, with the sink to be thrown away, if anything is wrong)."""
    plain = _Plain(read)
    manifest = read_manifest(plain)

    def extract(sink: DiskSink) -> None:
        done = 0  # records go forward: none overlaps, none exceeds the disk
        while True:
            offset, size = _RECORD.unpack(plain.exactly(_RECORD.size, "its data"))
            if offset == END and size == 0:
                break
            if offset < done or size > MAX_RECORD or offset + size > manifest.disk_size:
                raise BadArchive("its data lies outside the disk")
            sink.write(offset, plain.exactly(size, "its data"))
            done = offset + size
        if plain.exactly(_DIGEST, "its checksum", hashed=False) != plain.digest.digest():
            raise BadArchive("its checksum does not match (the file was changed or damaged)")
        if not plain.at_end():
            raise BadArchive("there is more after its end")

    return manifest, extract
