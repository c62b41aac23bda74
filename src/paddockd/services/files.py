"""The files API beside push and pull: a folder's listing (read in the box, as the box user,
like the dashboard's other file actions) and downloads for a browser: a file as it is, a
folder as a zip or tar holding nothing that leads outside it (services/safe_archive.py)."""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from paddock import _frames
from paddock._models import FileEntry, FileList

from ..domain.accounts import User
from ..domain.errors import InvalidRequest, InvalidState, NotFound
from .boxes import BoxService, box_path
from .safe_archive import ArchiveFormat, Tally, first_file, rewrite

MAX_ENTRIES = 5000
# What a listing may send back at most, whatever the box's `find` prints: names are at
# most 255 bytes and link targets 4096, so 5000 honest entries fit many times over.
_MAX_OUTPUT = 8 << 20
_FIELDS = 7
# One record per entry, each field NUL-terminated (the one byte no name holds): its own
# type, the type a link leads to, size, permission bits, mtime, link target, name. `cd`
# first, so a folder named like an option is never an option to find.
_LIST = (
    '[ -e "$1" ] || [ -L "$1" ] || { echo "no such file or directory: $1" >&2; exit 3; }; '
    '[ -d "$1" ] || { echo "$1 is not a folder" >&2; exit 4; }; '
    'cd -- "$1" 2>/dev/null && [ -r . ] || { echo "permission denied: $1" >&2; exit 5; }; '
    "find . -mindepth 1 -maxdepth 1 -printf '%y\\0%Y\\0%s\\0%m\\0%T@\\0%l\\0%f\\0' "
    '| head -z -n "$2"'
)
_OWN = {"f": "file", "d": "dir", "l": "symlink"}
_LEADS_TO = {"f": "file", "d": "dir", "N": "missing", "L": "missing"}
_MEDIA = {"zip": "application/zip", "tar": "application/x-tar"}


@dataclass(frozen=True)
class Download:
    filename: str  # as the browser should save it (from the box: untrusted text)
    media_type: str
    size: int | None  # known for a file, not for an archive made on the way
    chunks: AsyncIterator[bytes]


def _entry(fields: list[bytes]) -> FileEntry | None:
    """One listing record, or None for one that makes no sense (the box's `find` is the
    box's: whatever it prints is checked, never trusted)."""
    own, leads, size, mode, mtime, target, raw = fields
    name = raw.decode(errors="replace")
    if name in ("", ".", "..") or "/" in name:
        return None
    try:
        modified = datetime.fromtimestamp(float(mtime.decode()), timezone.utc)
        entry = FileEntry(
            name=name,
            type=_OWN.get(own.decode(errors="replace"), "other"),  # type: ignore[arg-type]
            size=max(int(size), 0),
            mode=int(mode, 8) & 0o7777,
            modified=modified,
        )
    except (ValueError, OverflowError, OSError):
        return None
    if entry.type == "symlink":
        entry.target = target.decode(errors="replace")
        entry.target_type = _LEADS_TO.get(leads.decode(errors="replace"), "other")  # type: ignore[assignment]
    return entry


def parse_listing(path: str, out: bytes) -> FileList:
    fields = out.split(b"\0")
    entries = [
        entry
        for i in range(0, len(fields) - _FIELDS + 1, _FIELDS)
        if (entry := _entry(fields[i : i + _FIELDS])) is not None
    ]
    entries.sort(key=lambda e: e.name)
    return FileList(path=path, entries=entries[:MAX_ENTRIES], truncated=len(entries) > MAX_ENTRIES)


class _Reader:
    """A blocking file over an async stream of chunks, for tarfile in a worker thread:
    each read that needs more asks the event loop for the next chunk."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = bytearray()
        self._done = False

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n < 0 or len(self._buf) < n):
            chunk = anyio.from_thread.run(_next_or_none, self._chunks)
            if chunk is None:
                self._done = True
            else:
                self._buf += chunk
        n = len(self._buf) if n < 0 else min(n, len(self._buf))
        piece = bytes(self._buf[:n])
        del self._buf[:n]
        return piece


async def _next_or_none(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


async def _close(chunks: AsyncIterator[bytes]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


class FileService:
    def __init__(self, boxes: BoxService, max_downloads: int = 8) -> None:
        self._boxes = boxes
        # A download holds a worker thread while it runs; these keep some for the rest.
        self._threads = anyio.CapacityLimiter(max_downloads)

    async def list(self, ref: str, path: str, caller: User | None = None) -> FileList:
        """The entries of the folder `path` in the box, by name (at most MAX_ENTRIES)."""
        path = box_path(path)
        cap = str(_FIELDS * (MAX_ENTRIES + 1))
        proc = await self._boxes.exec(
            ref, ["sh", "-c", _LIST, "sh", path, cap], {}, "/", None, caller=caller
        )
        out, err = bytearray(), bytearray()
        code: int | None = None
        try:
            async for kind, data in proc.output():
                if kind == _frames.STDOUT:
                    out += data
                    if len(out) > _MAX_OUTPUT:
                        break
                elif len(err) < 4096:
                    err += data
            else:
                code = await proc.wait()
        finally:
            if code is None:
                await proc.kill()
            await proc.close()
        why = err.decode(errors="replace").strip()[:500]
        box = (await self._boxes.resolve(ref, caller)).name
        if code == 3:
            raise NotFound(f"no such file or directory in box {box}: {path}")
        if code == 4:
            raise InvalidRequest(f"{path} in box {box} is not a folder")
        if code == 5:
            raise InvalidRequest(f"the box user may not read {path} in box {box}")
        if code not in (0, None) and not out:
            raise InvalidRequest(f"cannot list {path} in box {box}: {why or f'exit {code}'}")
        listing = parse_listing(path, bytes(out[:_MAX_OUTPUT]))
        listing.truncated = listing.truncated or code is None
        return listing

    async def download(
        self, ref: str, path: str, fmt: ArchiveFormat, caller: User | None = None
    ) -> Download:
        """`path` for a browser: a file's bytes; a folder as a safe archive in `fmt`; a
        link, what it leads to (in the box)."""
        chunks, st = await self._boxes.pull(ref, path, caller)
        if st.get("type") == "symlink":
            await _close(chunks)
            target = st.get("target")
            if not isinstance(target, str) or not target.startswith("/"):
                raise NotFound(f"{st['path']} is a link that leads nowhere")
            chunks, st = await self._boxes.pull(ref, target, caller)
        kind, where = st.get("type"), str(st.get("path"))
        if kind == "file":
            size = st.get("size")
            return Download(
                posixpath.basename(where),
                "application/octet-stream",
                size if isinstance(size, int) else None,
                self._threaded(chunks, first_file),
            )
        if kind == "dir" and where != "/":
            tally = Tally()
            return Download(
                f"{posixpath.basename(where)}.{fmt}",
                _MEDIA[fmt],
                None,
                self._threaded(chunks, lambda source: rewrite(source, fmt, tally)),
            )
        await _close(chunks)
        if kind == "dir":
            raise InvalidRequest("download a folder below / (the whole box is too much)")
        raise InvalidRequest(f"{where} is neither a file nor a folder")

    async def _threaded(
        self,
        chunks: AsyncIterator[bytes],
        work: Callable[[IO[bytes]], Generator[bytes, None, None]],
    ) -> AsyncIterator[bytes]:
        """What `work` makes of the stream, run in a worker thread a piece at a time, so
        tarfile and zipfile never block the event loop (nor hold a whole tree)."""
        pieces = work(_Reader(chunks))  # type: ignore[arg-type]
        try:
            while True:
                piece: Any = await anyio.to_thread.run_sync(
                    next, pieces, None, limiter=self._threads
                )
                if piece is None:
                    return
                yield piece
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            raise InvalidState(f"the box's archive could not be read ({exc})") from None
        finally:
            with anyio.CancelScope(shield=True):
                pieces.close()
                await _close(chunks)
