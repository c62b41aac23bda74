"""E2B's file uploads, streamed into the box as they arrive: each file of a
multipart/form-data body (the SDK's default), or an octet-stream body, gzip-compressed or
not. Nothing is spooled on the host, and nothing is held whole: a body of any size, or a
small gzip that inflates to gigabytes, costs paddockd a few pieces of memory and fills
only the box's own disk (where it meets the box's size).

The multipart framing is python-multipart's (the parser Starlette itself uses); only the
plumbing from its callbacks to one writer per file is here."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import anyio
from python_multipart.multipart import MultipartParser, parse_options_header

from ...domain.errors import InvalidRequest

T = TypeVar("T")
_PIECE = 1 << 20
MAX_FILES = 1000
# What a part's headers may hold (python-multipart bounds each header too).
_MAX_HEADERS = 16 * 1024


async def inflated(chunks: AsyncIterator[bytes], gzipped: bool) -> AsyncIterator[bytes]:
    """`chunks`, gunzipped when `gzipped`, in pieces of at most 1 MiB however much a piece
    of the input inflates to."""
    if not gzipped:
        async for chunk in chunks:
            yield chunk
        return
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        async for chunk in chunks:
            data = inflate.decompress(chunk, _PIECE)
            while True:
                if data:
                    yield data
                if not inflate.unconsumed_tail:
                    break
                data = inflate.decompress(inflate.unconsumed_tail, _PIECE)
        if tail := inflate.flush():
            yield tail
    except zlib.error as exc:
        raise InvalidRequest(f"the body is not valid gzip ({exc})") from None
    if not inflate.eof:
        raise InvalidRequest("the gzip body ends early")


def boundary_of(content_type: str) -> bytes:
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary", b"")
    if kind != b"multipart/form-data" or not boundary:
        raise InvalidRequest("a multipart upload needs a multipart/form-data boundary")
    return boundary


def _filename(headers: bytes) -> str | None:
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-disposition":
            _, options = parse_options_header(value.strip())
            raw = options.get(b"filename")
            return raw.decode("utf-8", "surrogateescape") if raw is not None else None
    return None


async def each_file(
    chunks: AsyncIterator[bytes],
    boundary: bytes,
    write: Callable[[str | None, AsyncIterator[bytes]], Awaitable[T]],
) -> list[T]:
    """`write(filename, data)` for each file part of the multipart body `chunks`, one after
    the other, each fed while the body arrives; their results in order. Parts without a
    filename are not files: their data is skipped."""
    events: list[tuple[str, bytes]] = []
    header = bytearray()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header.extend(b"\r\n" + data[start:end] + b":")
        if len(header) > _MAX_HEADERS:
            raise InvalidRequest("a part's headers are too long")

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.extend(data[start:end])
        if len(header) > _MAX_HEADERS:
            raise InvalidRequest("a part's headers are too long")

    def on_headers_finished() -> None:
        events.append(("begin", bytes(header)))
        header.clear()

    def on_part_data(data: bytes, start: int, end: int) -> None:
        events.append(("data", bytes(data[start:end])))

    def on_part_end() -> None:
        events.append(("end", b""))

    parser = MultipartParser(
        boundary,
        {
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    results: list[T] = []
    async with anyio.create_task_group() as tg:
        feed: anyio.abc.ObjectSendStream[bytes] | None = None
        done = anyio.Event()

        async def run(name: str | None, source: anyio.abc.ObjectReceiveStream[bytes]) -> None:
            async def data() -> AsyncIterator[bytes]:
                async with source:
                    async for piece in source:
                        yield piece

            results.append(await write(name, data()))
            done.set()

        async for chunk in chunks:
            try:
                parser.write(chunk)
            except InvalidRequest:
                raise
            except Exception as exc:  # python-multipart's own errors: a malformed body
                raise InvalidRequest(f"the multipart body could not be read ({exc})") from None
            for kind, data in events:
                if kind == "begin":
                    name = _filename(data)
                    if name is None:
                        continue
                    if len(results) >= MAX_FILES:
                        raise InvalidRequest(f"at most {MAX_FILES} files in one upload")
                    feed, source = anyio.create_memory_object_stream[bytes](4)
                    done = anyio.Event()
                    tg.start_soon(run, name, source)
                elif kind == "data" and feed is not None:
                    await feed.send(data)
                elif kind == "end" and feed is not None:
                    await feed.aclose()
                    feed = None
                    await done.wait()
            events.clear()
        parser.finalize()
        if feed is not None:
            raise InvalidRequest("the multipart body ends in the middle of a file")
    return results
