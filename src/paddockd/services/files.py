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

from paddock.wire.models import FileEntry, FileList

from ..domain.accounts import User
from ..domain.errors import InvalidRequest, InvalidState, NotFound
from ..runtime.base import FileInfo
from .boxes import BoxService, box_path
from .safe_archive import ArchiveFormat, Tally, first_file, rewrite

MAX_ENTRIES = 5000
_MEDIA = {"zip": "application/zip", "tar": "application/x-tar"}


@dataclass(frozen=True)
class Download:
    filename: str  # as the browser should save it (from the box: untrusted text)
    media_type: str
    size: int | None  # known for a file, not for an archive made on the way
    chunks: AsyncIterator[bytes]


def _entry(info: FileInfo) -> FileEntry | None:
    """One listing entry; None for one that makes no sense (the box's answer is checked,
    never trusted)."""
    if info.name in ("", ".", "..") or "/" in info.name:
        return None
    try:
        modified = datetime.fromtimestamp(info.mtime, timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
    entry = FileEntry(
        name=info.name, type=info.kind, size=info.size, mode=info.mode, modified=modified
    )
    if info.kind == "symlink":
        entry.target = info.link
        leads = info.leads_to or "missing"
        entry.target_type = "other" if leads == "symlink" else leads
    return entry


def listing(path: str, found: list[FileInfo], truncated: bool) -> FileList:
    entries = sorted((e for i in found if (e := _entry(i)) is not None), key=lambda e: e.name)
    return FileList(path=path, entries=entries[:MAX_ENTRIES], truncated=truncated)


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
        """The entries of the folder `path` in the box, by name (at most MAX_ENTRIES), read
        as the box user."""
        path = box_path(path)
        box = (await self._boxes.resolve(ref, caller)).name
        try:
            found = await self._boxes.list_files(ref, path, 1, MAX_ENTRIES + 1, caller=caller)
        except NotFound:
            raise NotFound(f"no such file or directory in box {box}: {path}") from None
        except InvalidRequest as exc:
            if "permission denied" in exc.message:
                raise InvalidRequest(f"the box user may not read {path} in box {box}") from None
            raise InvalidRequest(f"{path} in box {box} is not a folder") from None
        return listing(path, found, len(found) > MAX_ENTRIES)

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
