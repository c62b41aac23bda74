"""envd's processes (e2b/processes.py): a command's output fanned out to its streams. What
the box prints is held for a stream only up to MAX_BEHIND: the command waits for a slow
reader, and a stream that reads nothing for a while is let go; the command runs on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from paddockd.domain.errors import CapacityExceeded
from paddockd.services.e2b.processes import MAX_BEHIND, Output, ProcessRegistry

pytestmark = pytest.mark.anyio


class Flood:
    """An exec printing `total` bytes in 1 MiB pieces, as fast as it is read."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.printed = 0

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        chunk = b"y" * (1 << 20)
        while self.printed < self.total:
            self.printed += len(chunk)
            yield 1, chunk
            await asyncio.sleep(0)

    async def wait(self) -> int:
        return 0

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def resize(self, cols: int, rows: int) -> None: ...

    async def kill(self) -> None: ...

    async def close(self) -> None: ...


async def test_a_stream_nobody_reads_holds_little_then_is_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("paddockd.services.backlog.STALLED", 0.5)
    registry = ProcessRegistry()
    flood = Flood(64 << 20)
    p = registry.add(1, "box", flood, "yes", [], {}, None, None, False, False)
    stalled, reading = p.subscribe(), p.subscribe()
    registry.start(p)
    await asyncio.sleep(0.2)
    # The command waits for its slowest stream, which holds no more than its share.
    assert flood.printed <= MAX_BEHIND + (2 << 20)
    assert stalled.held <= MAX_BEHIND + (1 << 20)
    got = 0
    async for item in registry.events(p, reading, 5):
        assert isinstance(item, Output)
        got += len(item.data)
    # The stalled stream was let go; the one that read got everything.
    assert got == 64 << 20
    assert stalled.qsize() == 1  # what it held went; only the notice is left
    with pytest.raises(CapacityExceeded, match="behind"):
        async for _ in registry.events(p, stalled, 5):
            pass


async def test_a_stream_that_goes_away_holds_up_nothing() -> None:
    registry = ProcessRegistry()
    flood = Flood(64 << 20)
    p = registry.add(1, "box", flood, "yes", [], {}, None, None, False, False)
    gone = p.subscribe()
    registry.start(p)
    await asyncio.sleep(0.1)
    assert flood.printed < 64 << 20
    p.unsubscribe(gone)  # its client went: the stream's `finally`
    for _ in range(500):
        if p.ended is not None:
            break
        await asyncio.sleep(0.01)
    assert p.ended is not None and flood.printed == 64 << 20
