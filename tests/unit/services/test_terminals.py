"""The dashboard's terminals (services/terminals.py) on fakes: a shell outlives its
window for a while and its output is replayed on attaching again; another user's key
reaches nothing of it; closing ends it, and so does waiting too long."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from paddock.wire import frames as _frames
from paddockd.runtime.base import ExecSpec
from paddockd.services.terminals import MAX_BEHIND, SCROLLBACK, TerminalService

from ..conftest import People, World

pytestmark = pytest.mark.anyio
KEY = "k" * 16


class Shell:
    """An echoing shell: what it is sent comes back, until it is killed."""

    def __init__(self, spec: ExecSpec) -> None:
        self.spec = spec
        self.pipe: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.killed = False

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        while (data := await self.pipe.get()) is not None:
            yield _frames.STDOUT, data

    async def wait(self) -> int:
        return 137 if self.killed else 0

    async def write(self, data: bytes) -> None:
        self.pipe.put_nowait(data)

    async def close_stdin(self) -> None:
        pass

    async def resize(self, cols: int, rows: int) -> None:
        pass

    async def kill(self) -> None:
        self.killed = True
        self.pipe.put_nowait(None)

    async def close(self) -> None:
        pass


@pytest.fixture
def shells(world: World, monkeypatch: pytest.MonkeyPatch) -> list[Shell]:
    started: list[Shell] = []

    async def exec_(cid: str, spec: ExecSpec) -> Shell:
        started.append(Shell(spec))
        return started[-1]

    monkeypatch.setattr(world.runtime, "exec", exec_)
    return started


async def read(output: AsyncIterator[bytes], n: int) -> list[tuple[int, bytes]]:
    frames: list[tuple[int, bytes]] = []
    while len(frames) < n:
        frame = await asyncio.wait_for(anext(output), 5)
        frames.extend(_frames.FrameDecoder().feed(frame))
    return frames


async def test_a_shell_outlives_its_window(
    world: World, people: People, shells: list[Shell]
) -> None:
    terms = TerminalService(world.boxes, keep=0.3)
    box = await world.boxes.create("t", None, None, None, [], caller=people.bob)
    held = await terms.attach(box.name, KEY, (100, 30), people.bob)
    assert (
        not held.resumed and shells[0].spec.tty and shells[0].spec.cmd[-2:] == ["/bin/bash", "-l"]
    )
    await held.write(b"echo hi\n")
    assert await read(held.output(), 1) == [(_frames.STDOUT, b"echo hi\n")]
    terms.detach(held)
    await shells[0].write(b"while away\n")
    await asyncio.sleep(0.05)
    again = await terms.attach(box.id, KEY, (100, 30), people.bob)
    assert again.resumed and len(shells) == 1
    output = again.output()
    assert await read(output, 1) == [(_frames.STDOUT, b"echo hi\nwhile away\n")]
    # Carol's same key is another terminal, in a box she cannot even see.
    with pytest.raises(Exception, match="no box"):
        await terms.attach(box.id, KEY, None, people.carol)
    # Closed: the shell ends, and the window is told.
    await terms.close(again)
    assert shells[0].killed and terms.count == 0
    assert (await read(output, 1))[-1][0] == _frames.EXIT


async def test_a_detached_shell_ends_after_a_while(
    world: World, people: People, shells: list[Shell]
) -> None:
    terms = TerminalService(world.boxes, keep=0.2)
    box = await world.boxes.create("t", None, None, None, [], caller=people.bob)
    terms.detach(await terms.attach(box.name, KEY, None, people.bob))
    await asyncio.sleep(0.6)
    assert shells[0].killed and terms.count == 0
    fresh = await terms.attach(box.name, KEY, None, people.bob)
    assert not fresh.resumed and len(shells) == 2
    await terms.shutdown()


async def test_keys_are_checked(world: World, people: People, shells: list[Shell]) -> None:
    terms = TerminalService(world.boxes)
    box = await world.boxes.create("t", None, None, None, [], caller=people.bob)
    for key in ("short", "x" * 65, "../../etc", "a b c d e f g h"):
        with pytest.raises(Exception, match="terminal key"):
            await terms.attach(box.name, key, None, people.bob)
    assert shells == []


async def test_a_window_that_stops_reading_holds_up_its_shell_then_is_let_go(
    world: World, people: People, shells: list[Shell], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shell printing to a window that no longer reads: paddockd holds about MAX_BEHIND of
    it (the shell waits, as for a terminal), then lets that window go as if it had gone;
    the shell is kept and attaching again replays the scrollback."""
    monkeypatch.setattr("paddockd.services.backlog.STALLED", 0.3)
    terms = TerminalService(world.boxes)
    box = await world.boxes.create("t", None, None, None, [], caller=people.bob)
    held = await terms.attach(box.name, KEY, None, people.bob)
    chunk = b"y" * (256 << 10)
    for _ in range(64):  # 16 MiB, read by nobody
        await shells[0].write(chunk)
    await asyncio.sleep(0.1)
    assert held.frames.held <= MAX_BEHIND + (300 << 10)
    assert shells[0].pipe.qsize() > 50  # the shell waits for its window
    await asyncio.sleep(0.5)
    assert held.frames.qsize() == 1  # let go: what it held went, its end is left
    assert [frame async for frame in held.output()] == []
    assert not shells[0].killed
    terms.detach(held)
    again = await terms.attach(box.name, KEY, None, people.bob)
    assert again.resumed and len(again.replay) == SCROLLBACK
    await terms.shutdown()
