"""Request bodies to files of paddockd's and back, a piece at a time: what a client sends
is written under a limit (it cannot fill the host's disk), and a file is read back without
ever being held whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import anyio.to_thread

from ..domain.errors import PayloadTooLarge

PIECE = 1 << 20


async def spool(chunks: AsyncIterator[bytes], path: Path, limit: int, too_large: str) -> int:
    """Write `chunks` to `path` (bytes written); past `limit`, PayloadTooLarge saying
    `too_large`, and no file is left."""
    f = await anyio.to_thread.run_sync(lambda: path.open("wb"))
    total = 0
    try:
        async for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise PayloadTooLarge(too_large)
            await anyio.to_thread.run_sync(f.write, chunk)
    except BaseException:
        await anyio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))
        raise
    finally:
        await anyio.to_thread.run_sync(f.close)
    return total


async def pieces(f: IO[bytes]) -> AsyncIterator[bytes]:
    """An open file's bytes from where it stands, a piece at a time."""
    while piece := await anyio.to_thread.run_sync(f.read, PIECE):
        yield piece


async def read_back(path: Path) -> AsyncIterator[bytes]:
    f = await anyio.to_thread.run_sync(lambda: path.open("rb"))
    try:
        async for piece in pieces(f):
            yield piece
    finally:
        await anyio.to_thread.run_sync(f.close)
