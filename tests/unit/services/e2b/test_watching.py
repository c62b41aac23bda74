"""Directory watches (e2b/watching.py): the in-box watcher's output is the box's, so anything
it prints is read safely; its first line decides between watching, an error and polling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from e2b.envd.filesystem import filesystem_pb as pb

from paddockd.api.e2b.filesystem import parse_entries
from paddockd.domain.errors import InvalidRequest, NotFound
from paddockd.runtime.base import FileInfo
from paddockd.services.e2b.watching import InotifyWatch, PolledWatch, Watch, start_watch

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


async def _no_shell(folder: str, depth: int) -> list[FileInfo]:
    raise AssertionError("not polled")


async def test_hostile_lines_are_skipped_and_events_come_through() -> None:
    entry = ["f", "f", "1", "-rw-r--r--", "644", "abc", "abc", "1.5", "", "/config/w/a"]
    entry += ["1000", "1000"]
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

    async def listing(folder: str, depth: int) -> list[FileInfo]:
        return [FileInfo(folder + "/a", "file", 1, 0o644, 1.0, 1000, 1000)]

    async def no_python(argv: list[str]) -> Scripted:
        return Scripted([], 127)

    polled = await start_watch(no_python, listing, parse_entries, "/config/w", True, False)
    assert isinstance(polled, PolledWatch)


class Endless(Scripted):
    """An exec that prints `line` forever, counting how many it was asked for."""

    def __init__(self, line: bytes, per_chunk: int = 100) -> None:
        super().__init__([])
        self._line = line
        self._per_chunk = per_chunk
        self.lines = 0

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        yield 1, b'{"ready": true}\n'
        while not self.stdin_closed:
            self.lines += self._per_chunk
            yield 1, self._line * self._per_chunk
            await asyncio.sleep(0)


async def _until(check: object, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "line", [b"noise\n", b"[1]\n", b'{"t": "bogus", "n": "x"}\n', b'{"overflow": true}\n']
)
async def test_a_watcher_that_prints_only_noise_is_ended_not_read_forever(line: bytes) -> None:
    proc = Endless(line)
    w = await InotifyWatch.start(proc, parse_entries)
    await _until(lambda: w.ended)
    assert w.ended
    read = proc.lines
    await asyncio.sleep(0.05)
    assert proc.lines == read, "paddockd read on after the watch ended"
    assert read < 5_000
    await w.close()


async def test_events_nobody_reads_stop_the_reading_until_a_drain() -> None:
    """A flood of true events: paddockd keeps at most _MAX_PENDING of them and reads no more
    until someone takes them; the box waits (its pipe fills), paddockd does not spin."""
    proc = Endless(b'{"t": "write", "n": "f"}\n')
    w = await InotifyWatch.start(proc, parse_entries)
    await _until(lambda: proc.lines >= 10_000)
    await asyncio.sleep(0.1)
    held = proc.lines
    await asyncio.sleep(0.1)
    assert proc.lines == held < 10_200, "paddockd read on with nobody taking the events"
    assert len(await w.drain()) >= 10_000
    await _until(lambda: proc.lines > held)
    assert proc.lines > held  # the next read goes on
    assert not w.ended
    await w.close()


async def test_large_events_are_held_up_to_a_mebibyte_not_a_count() -> None:
    """3000 events of 60 KB names once held ~190 MB of paddockd: what waits is bounded in
    bytes too."""
    proc = Endless(b'{"t": "write", "n": "' + b"n" * 60_000 + b'"}\n', per_chunk=1)
    w = await InotifyWatch.start(proc, parse_entries)
    await _until(lambda: proc.lines >= 17)
    await asyncio.sleep(0.1)
    held = proc.lines
    await asyncio.sleep(0.1)
    assert proc.lines == held < 30, "paddockd read on past its byte budget"
    assert sum(len(e.to_binary()) for e in await w.drain()) < (1 << 20) + 64_000
    await w.close()


async def test_an_overflow_after_events_is_no_noise(caplog: pytest.LogCaptureFixture) -> None:
    lines = [b'{"ready": true}\n']
    for _ in range(1500):  # more overflows than the noise allowance, each after an event
        lines.append(b'{"t": "create", "n": "a"}\n{"overflow": true}\n')
    proc = Scripted(lines, hold=True)
    w = await InotifyWatch.start(proc, parse_entries)
    events: list[pb.FilesystemEvent] = []
    await _until(lambda: len(w._pending) >= 1500)
    events += await w.drain()
    assert len(events) == 1500
    assert not w.ended
    assert caplog.text.count("overflowed") == 1  # the log says so once per watch
    await w.close()
