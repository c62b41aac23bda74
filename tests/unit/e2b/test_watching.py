"""Directory watches (e2b/watching.py): the in-box watcher's output is the box's, so anything
it prints is read safely; its first line decides between watching, an error and polling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from e2b.envd.filesystem import filesystem_pb as pb

from paddockd.domain.errors import InvalidRequest, NotFound
from paddockd.e2b.envd_filesystem import parse_entries
from paddockd.e2b.watching import InotifyWatch, PolledWatch, Watch, start_watch

pytestmark = pytest.mark.anyio


class Scripted:
    """An exec whose stdout is the given chunks, then an exit code."""

    def __init__(self, chunks: list[bytes], code: int = 0, hold: bool = False) -> None:
        self._chunks = chunks
        self._code = code
        self._hold = hold
        self.stdin_closed = False

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        for chunk in self._chunks:
            yield 1, chunk
        while self._hold and not self.stdin_closed:
            await asyncio.sleep(0.01)

    async def wait(self) -> int:
        return self._code

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None:
        self.stdin_closed = True

    async def resize(self, cols: int, rows: int) -> None: ...

    async def kill(self) -> None: ...

    async def close(self) -> None:
        self.stdin_closed = True


async def _no_shell(script: str, *args: str) -> str:
    raise AssertionError("not polled")


async def test_hostile_lines_are_skipped_and_events_come_through() -> None:
    entry = ["f", "f", "1", "-rw-r--r--", "644", "abc", "abc", "1.5", "", "/config/w/a"]
    lines = [
        b'{"ready": true}\n',
        b"not json\n",
        b"[" * 50_000 + b"\n",  # nesting deep enough to break a recursive parser
        b'{"t": "bogus", "n": "x"}\n{"t": "create", "n": ""}\n{"t": "write", "n": 7}\n',
        b'{"t": "create", "n": "a", "e": ' + str(entry).replace("'", '"').encode() + b"}\n",
        b'{"t": "rename", "n": "b", "e": ["only", "some"]}\n',
    ]
    proc = Scripted(lines, hold=True)
    w = await InotifyWatch.start(proc, parse_entries)
    events: list[pb.FilesystemEvent] = []
    for _ in range(100):
        events += await w.drain()
        if len(events) >= 2:
            break
        await asyncio.sleep(0.01)
    assert [(e.name, e.type) for e in events] == [
        ("a", pb.EventType.CREATE),
        ("b", pb.EventType.RENAME),
    ]
    assert events[0].entry is not None and events[0].entry.path == "/config/w/a"
    assert events[1].entry is None
    await w.close()
    assert proc.stdin_closed


async def test_a_line_without_end_ends_the_watch() -> None:
    proc = Scripted([b'{"ready": true}\n', b"x" * (70 << 10)], hold=True)
    w = await InotifyWatch.start(proc, parse_entries)
    for _ in range(100):
        if w.ended:
            break
        await asyncio.sleep(0.01)
    assert w.ended
    with pytest.raises(NotFound, match="ended"):
        await w.drain()
    await w.close()


async def test_the_first_line_decides() -> None:
    async def starts(*chunks: bytes, code: int = 1) -> Watch:
        async def start(argv: list[str]) -> Scripted:
            return Scripted(list(chunks), code)

        return await start_watch(start, _no_shell, parse_entries, "/config/w", False, False)

    with pytest.raises(NotFound, match="no such"):
        await starts(b'{"error": "missing", "message": "no such file or directory: w"}\n')
    with pytest.raises(InvalidRequest, match="not a directory"):
        await starts(b'{"error": "notdir", "message": "not a directory: w"}\n')
    with pytest.raises(InvalidRequest, match="the directory watcher failed"):
        await starts(b"garbage\n")

    async def listing(script: str, *args: str) -> str:
        return "a\0f\x001\x001.0\0"

    async def no_python(argv: list[str]) -> Scripted:
        return Scripted([], 127)

    polled = await start_watch(no_python, listing, parse_entries, "/config/w", True, False)
    assert isinstance(polled, PolledWatch)
