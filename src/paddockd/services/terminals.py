"""The dashboard's terminals: a login shell in a box with a TTY that outlives its
WebSocket for a while, so a browser that lost the connection (a network blip, a laptop
lid) attaches to the same shell again and sees what it missed.

A terminal is keyed by (user, box, the browser's own key for it): another user cannot
attach to it, whatever key they send. Each keeps the last `SCROLLBACK` bytes of output,
replayed on attach; one detached longer than `keep` seconds is ended, as is one whose box
stops (the shell ends with it)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from paddock.wire import frames as _frames

from ..domain.accounts import User
from ..domain.errors import CapacityExceeded, InvalidRequest
from ..runtime.base import ExecProcess
from .backlog import Backlog
from .boxes import BoxService

SCROLLBACK = 256 * 1024
# How far a window may fall behind its shell's output before the shell waits for it, as a
# terminal's reader makes its writer wait (services/backlog.py); a window that reads nothing
# for a minute meanwhile is let go, as if it had gone: the shell is kept.
MAX_BEHIND = 1 << 20
KEEP = 300.0
PER_USER = 16
SHELL = ["/bin/bash", "-l"]
_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")

# What a listener receives: output frames (already framed for the WebSocket), ended by
# None when the shell ended, another window took the terminal over, or it was let go.
Frames = Backlog[bytes | None]


def _listener() -> Frames:
    return Frames(MAX_BEHIND, lambda frame: len(frame or b""))


@dataclass(eq=False)
class Terminal:
    key: tuple[str, str, str]
    proc: ExecProcess
    scrollback: bytearray = field(default_factory=bytearray)
    listener: Frames | None = None
    ended: bool = False
    pump: asyncio.Task[None] | None = None
    expiry: asyncio.Task[None] | None = None

    def record(self, data: bytes) -> None:
        self.scrollback += data
        if len(self.scrollback) > SCROLLBACK:
            del self.scrollback[: len(self.scrollback) - SCROLLBACK]

    def tell(self, frame: bytes | None) -> None:
        if self.listener is None:
            return
        if frame is None:
            self.listener.finish(None)
        else:
            self.listener.put(frame)

    async def caught_up(self) -> None:
        """Until its window is not too far behind; one that stopped reading is let go."""
        listener = self.listener
        if listener is not None and not await listener.room():
            listener.let_go(None)


@dataclass(frozen=True)
class Attachment:
    """A browser window's hold on a terminal: what it missed, then what comes."""

    terminal: Terminal
    replay: bytes
    frames: Frames
    resumed: bool

    async def output(self) -> AsyncIterator[bytes]:
        if self.replay:
            yield _frames.encode(_frames.STDOUT, self.replay)
        while (frame := await self.frames.get()) is not None:
            yield frame

    async def write(self, data: bytes) -> None:
        await self.terminal.proc.write(data)

    async def resize(self, cols: int, rows: int) -> None:
        await self.terminal.proc.resize(cols, rows)


class TerminalService:
    def __init__(self, boxes: BoxService, keep: float = KEEP) -> None:
        self._boxes = boxes
        self._keep = keep
        self._terminals: dict[tuple[str, str, str], Terminal] = {}

    async def attach(
        self, ref: str, key: str, size: tuple[int, int] | None, caller: User
    ) -> Attachment:
        """The caller's terminal `key` in the box, started if it is not kept."""
        if not _KEY_RE.match(key):
            raise InvalidRequest("a terminal key is 8-64 letters, digits, '-' or '_'")
        box = await self._boxes.resolve(ref, caller)
        full = (caller.id, box.id, key)
        term = self._terminals.get(full)
        resumed = term is not None and not term.ended
        if term is None or term.ended:
            term = await self._start(ref, full, size, caller)
        if term.expiry is not None:
            term.expiry.cancel()
            term.expiry = None
        # One window at a time: a second one (a duplicated tab) takes it over.
        term.tell(None)
        term.listener = _listener()
        if resumed and size:
            with contextlib.suppress(Exception):  # it may have ended this instant
                await term.proc.resize(*size)  # full-screen programs redraw
        return Attachment(term, bytes(term.scrollback) if resumed else b"", term.listener, resumed)

    def detach(self, attachment: Attachment) -> None:
        """The window went away: keep the shell for `keep` seconds."""
        term = attachment.terminal
        attachment.frames.close()  # its shell waits for it no more
        if term.listener is not attachment.frames or term.ended:
            return
        term.listener = None
        term.expiry = asyncio.create_task(self._expire(term))

    async def close(self, attachment: Attachment) -> None:
        """The user closed the terminal: its shell ends now."""
        await self._end(attachment.terminal)

    async def _start(
        self, ref: str, full: tuple[str, str, str], size: tuple[int, int] | None, caller: User
    ) -> Terminal:
        mine = [t for t in self._terminals.values() if t.key[0] == caller.id and not t.ended]
        if len(mine) >= PER_USER:
            raise CapacityExceeded(
                f"you have {len(mine)} open terminals, the most one user may keep: close one"
            )
        proc = await self._boxes.exec(
            ref,
            SHELL,
            {"TERM": "xterm-256color"},
            None,
            None,
            tty=True,
            stdin=True,
            size=size,
            caller=caller,
        )
        term = Terminal(full, proc)
        self._terminals[full] = term
        term.pump = asyncio.create_task(self._pump(term))
        return term

    async def _pump(self, term: Terminal) -> None:
        code: int | None = None
        try:
            async for _, data in term.proc.output():
                term.record(data)
                term.tell(_frames.encode(_frames.STDOUT, data))
                await term.caught_up()
            code = await term.proc.wait()
        except Exception:  # the engine went away: the terminal ends all the same
            code = None
        finally:
            term.ended = True
            if self._terminals.get(term.key) is term:
                del self._terminals[term.key]
            term.tell(_frames.encode_json(_frames.EXIT, {"exit_code": code}))
            term.tell(None)
            with contextlib.suppress(Exception):
                await term.proc.close()

    async def _expire(self, term: Terminal) -> None:
        await asyncio.sleep(self._keep)
        await self._end(term)

    async def _end(self, term: Terminal) -> None:
        with contextlib.suppress(Exception):
            await term.proc.kill()
        if term.pump is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(term.pump), 10)

    async def shutdown(self) -> None:
        for term in list(self._terminals.values()):
            await self._end(term)

    @property
    def count(self) -> int:
        return len(self._terminals)
