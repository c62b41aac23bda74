"""envd's directory watches. A watch is the kernel's inotify inside the box (inbox_watch.py,
run with the box's python3 as the caller's box user), its events relayed as they come. A
box without python3, or whose inotify is exhausted, is polled instead (PolledWatch), with
the limits that brings, which docs/e2b.md states.

Either kind serves both of envd's ways to watch: a stream (WatchDir: `events()`) and a
registered watcher read now and then (CreateWatcher/GetWatcherEvents: `drain()`)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Protocol

from e2b.envd.filesystem import filesystem_pb as pb

from ...domain.errors import InvalidRequest, NotFound, PaddockError
from ...runtime.base import ExecProcess, FileInfo

log = logging.getLogger("paddockd.e2b")

SCRIPT = (Path(__file__).parent / "inbox_watch.py").read_text()
_TYPES = {
    "create": pb.EventType.CREATE,
    "write": pb.EventType.WRITE,
    "remove": pb.EventType.REMOVE,
    "rename": pb.EventType.RENAME,
    "chmod": pb.EventType.CHMOD,
}
_READY_WITHIN = 15.0
# A line longer than any event can be is the box's mischief: the watch ends.
_MAX_LINE = 64 << 10
# Events kept between two reads (a registered watcher's drain, a stream's next send): past
# this paddockd reads no more until the next, the watcher in the box blocks and its inotify
# queue overflows instead. Nothing the box prints is read faster than its reader reads.
_MAX_PENDING = 10_000
# ... and in bytes (an event's name and entry are the box's to choose: 3000 events of 60 KB
# once held 190 MB here). With at most 64 watchers per sandbox, a box holds 64 MiB at most.
_MAX_PENDING_BYTES = 1 << 20
# Lines that are no event (not JSON, not an event, an overflow notice again with no event
# since the last one): the watcher never prints them, so a box that does is flooding the
# reader with work that reaches nobody; after this many its watch ends.
_MAX_NOISE = 1000
_POLL = 0.5
_NO_PYTHON = 127

Entries = Callable[[str], list[pb.EntryInfo]]
# A folder's entries, so many levels down (the box's files, as the watching user).
Lister = Callable[[str, int], Awaitable[list[FileInfo]]]


class Watch(Protocol):
    ended: bool  # nothing more will come (the box stopped, the folder went)

    def events(self, keepalive: float) -> AsyncIterator[pb.FilesystemEvent | None]:
        """Events as they come, until the watch ends; None after `keepalive` seconds
        without one."""
        ...

    async def drain(self) -> list[pb.FilesystemEvent]:
        """The events since the last drain."""
        ...

    async def close(self) -> None: ...


class _NoInotify(Exception):
    """The box cannot run the inotify watcher: poll instead."""


class InotifyWatch:
    def __init__(self, proc: ExecProcess, entries: Entries) -> None:
        self._proc = proc
        self._entries = entries
        self._pending: collections.deque[pb.FilesystemEvent] = collections.deque()
        self._held = 0  # bytes of the events pending
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._noise = 0
        self._overflowed = False  # an overflow notice since the last event
        self._warned = False
        self._lines = self._read_lines()
        self._pump: asyncio.Task[None] | None = None
        self.ended = False

    @classmethod
    async def start(cls, proc: ExecProcess, entries: Entries) -> InotifyWatch:
        """Wait for the watcher's first line: ready (from then on nothing is missed), or
        why it cannot watch; anything else is a failed watcher."""
        w = cls(proc, entries)
        try:
            first = await asyncio.wait_for(anext(w._lines, None), _READY_WITHIN)
        except (asyncio.TimeoutError, PaddockError):
            await w.close()
            raise InvalidRequest("the box's directory watcher did not start") from None
        if first is None or "ready" not in first:
            code = await _exit_code(proc)
            await w.close()
            if first is None and code == _NO_PYTHON:
                raise _NoInotify("no python3 in the box")
            if first is not None and first.get("error") == "inotify":
                raise _NoInotify(str(first.get("message")))
            message = str((first or {}).get("message") or "the directory watcher failed")
            if first is not None and first.get("error") == "missing":
                raise NotFound(message)
            raise InvalidRequest(message)
        w._pump = asyncio.get_running_loop().create_task(w._run())
        return w

    async def _read_lines(self) -> AsyncIterator[dict[str, object] | None]:
        """Each line of the watcher's stdout: its object, None for one that is not."""
        buf = bytearray()
        async for kind, data in self._proc.output():
            if kind != 1:
                continue
            buf.extend(data)
            start = 0
            while (nl := buf.find(b"\n", start)) >= 0:
                line = bytes(buf[start:nl])
                start = nl + 1
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):  # the box's output: anything at all
                    obj = None
                yield obj if isinstance(obj, dict) else None
            del buf[:start]
            if len(buf) > _MAX_LINE:
                return

    async def _run(self) -> None:
        try:
            async for obj in self._lines:
                event = self._event(obj) if obj is not None else None
                if event is None:
                    if obj is not None and self._notice(obj):
                        continue
                    self._noise += 1
                    if self._noise > _MAX_NOISE:
                        log.warning("a directory watch in a box ended: its watcher printed noise")
                        return
                    continue
                self._overflowed = False
                self._pending.append(event)
                self._held += len(event.to_binary())
                self._arrived.set()
                if len(self._pending) >= _MAX_PENDING or self._held >= _MAX_PENDING_BYTES:
                    self._room.clear()
                    await self._room.wait()  # until a reader takes them
        except PaddockError:
            pass
        finally:
            self.ended = True
            self._arrived.set()

    def _notice(self, obj: dict[str, object]) -> bool:
        """Whether `obj` is the watcher's note that the kernel's queue overflowed: one at a
        time (the queue refills only with events in between), logged once per watch."""
        if obj.get("overflow") is not True or self._overflowed:
            return False
        self._overflowed = True
        if not self._warned:
            self._warned = True
            log.warning("a directory watch in a box overflowed: events were lost")
        return True

    def _event(self, obj: dict[str, object]) -> pb.FilesystemEvent | None:
        kind, name = _TYPES.get(str(obj.get("t"))), obj.get("n")
        if kind is None or not isinstance(name, str) or not name:
            return None
        fields = obj.get("e")
        found = []
        if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
            found = self._entries("".join(f + "\0" for f in fields))
        return pb.FilesystemEvent(name=name, type=kind, entry=found[0] if found else None)

    async def drain(self) -> list[pb.FilesystemEvent]:
        if self.ended and not self._pending:
            raise NotFound("the watcher has ended (its folder or sandbox went away)")
        events = list(self._pending)
        self._pending.clear()
        self._held = 0
        self._arrived.clear()
        self._room.set()
        return events

    async def events(self, keepalive: float) -> AsyncIterator[pb.FilesystemEvent | None]:
        while True:
            try:
                await asyncio.wait_for(self._arrived.wait(), keepalive)
            except asyncio.TimeoutError:
                yield None
                continue
            if self.ended and not self._pending:
                return
            for event in await self.drain():
                yield event

    async def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
        # Its stdin closing is what ends the watcher in the box.
        with contextlib.suppress(PaddockError, OSError):
            await self._proc.close_stdin()
        with contextlib.suppress(PaddockError, OSError):
            await self._proc.close()


async def _exit_code(proc: ExecProcess) -> int | None:
    try:
        return await asyncio.wait_for(proc.wait(), 5)
    except (asyncio.TimeoutError, PaddockError):
        return None


class PolledWatch:
    """The folder listed every half second and compared: a file made and removed between
    two looks is missed, a rename is a remove and a create, and no entry info is given."""

    def __init__(self, listed: Lister, path: str, depth: int) -> None:
        self._listed = listed
        self._path = path
        self._depth = depth
        self._seen: dict[str, tuple[str, str, str]] = {}
        self.ended = False

    @classmethod
    async def start(cls, listed: Lister, path: str, recursive: bool) -> PolledWatch:
        w = cls(listed, path, 64 if recursive else 1)
        w._seen = await w._snapshot()
        return w

    async def _snapshot(self) -> dict[str, tuple[str, str, str]]:
        try:
            found = await self._listed(self._path, self._depth)
        except PaddockError:
            self.ended = True
            raise
        base = self._path.rstrip("/") + "/"
        return {
            i.path[len(base) :]: (i.kind, str(i.size), repr(i.mtime))
            for i in found
            if i.path.startswith(base)
        }

    async def drain(self) -> list[pb.FilesystemEvent]:
        now = await self._snapshot()
        events = []
        for name, (kind, size, mtime) in now.items():
            before = self._seen.get(name)
            if before is None:
                events.append(pb.FilesystemEvent(name=name, type=pb.EventType.CREATE))
                if kind == "file" and size != "0":
                    events.append(pb.FilesystemEvent(name=name, type=pb.EventType.WRITE))
            elif before[1:] != (size, mtime):
                events.append(pb.FilesystemEvent(name=name, type=pb.EventType.WRITE))
        events += [
            pb.FilesystemEvent(name=name, type=pb.EventType.REMOVE)
            for name in self._seen
            if name not in now
        ]
        self._seen = now
        return events

    async def events(self, keepalive: float) -> AsyncIterator[pb.FilesystemEvent | None]:
        quiet = 0.0
        while True:
            await asyncio.sleep(_POLL)
            events = await self.drain()
            quiet = 0.0 if events else quiet + _POLL
            if quiet >= keepalive:
                quiet = 0.0
                yield None
            for event in events:
                yield event

    async def close(self) -> None:
        pass


async def start_watch(
    start: Callable[[list[str]], Awaitable[ExecProcess]],
    listed: Lister,
    entries: Entries,
    path: str,
    recursive: bool,
    include_entry: bool,
) -> Watch:
    """inotify in the box if it can, else polling. `start` runs a command in the box (stdin
    open) as the caller's user; `listed` lists a folder there."""
    argv = ["python3", "-c", SCRIPT, path, str(int(recursive)), str(int(include_entry))]
    try:
        return await InotifyWatch.start(await start(argv), entries)
    except _NoInotify as exc:
        log.info("a directory watch is polled: %s", exc)
    return await PolledWatch.start(listed, path, recursive)
