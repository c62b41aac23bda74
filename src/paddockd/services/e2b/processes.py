"""Processes started through envd, per box: E2B addresses a running command by pid (or tag)
to send it input, signal it, resize its PTY or attach to its output again, so each one
started here stays registered, with its output fanned out to whoever listens, until it ends.
A command outlives the stream that started it (E2B's background commands rely on that)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ...domain.errors import CapacityExceeded, NotFound
from ...runtime.base import ExecProcess
from ..backlog import Backlog

# How far one stream may fall behind a command's output before the command waits for it
# (services/backlog.py); one that reads nothing for a minute meanwhile is ended with an
# error, and the command runs on for the others (`connect` attaches to it again).
MAX_BEHIND = 4 << 20


@dataclass(frozen=True)
class Output:
    kind: str  # "stdout", "stderr", "pty", "end", or "behind" (the stream was let go)
    data: bytes = b""
    exit_code: int = 0


_BEHIND = Output("behind")
Listener = Backlog[Output]


@dataclass
class EnvdProcess:
    pid: int
    box_id: str
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str | None
    tag: str | None
    pty: bool
    stdin: bool
    proc: ExecProcess
    _listeners: list[Listener] = field(default_factory=list)
    ended: Output | None = None

    def subscribe(self) -> Listener:
        queue = Listener(MAX_BEHIND, lambda item: len(item.data))
        if self.ended is not None:
            queue.finish(self.ended)
        else:
            self._listeners.append(queue)
        return queue

    def unsubscribe(self, queue: Listener) -> None:
        queue.close()
        with contextlib.suppress(ValueError):
            self._listeners.remove(queue)

    def _publish(self, item: Output) -> None:
        for queue in self._listeners:
            queue.put(item)

    async def _caught_up(self) -> None:
        """Until no stream is too far behind; one that stopped reading is let go."""
        for queue in list(self._listeners):
            if not await queue.room():
                self.unsubscribe(queue)
                queue.let_go(_BEHIND)


class ProcessRegistry:
    def __init__(self) -> None:
        # Synthetic pids: the engine's are the host's, meaningless (and telling) to a box.
        self._pids = itertools.count(1000)
        self._running: dict[str, dict[int, EnvdProcess]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def next_pid(self) -> int:
        return next(self._pids)

    def add(
        self,
        pid: int,
        box_id: str,
        proc: ExecProcess,
        cmd: str,
        args: list[str],
        envs: dict[str, str],
        cwd: str | None,
        tag: str | None,
        pty: bool,
        stdin: bool,
    ) -> EnvdProcess:
        p = EnvdProcess(pid, box_id, cmd, args, envs, cwd, tag, pty, stdin, proc)
        self._running.setdefault(box_id, {})[p.pid] = p
        return p

    def start(self, p: EnvdProcess) -> None:
        """Pump its output once the starter has subscribed, so none of it is missed."""
        task = asyncio.create_task(self._pump(p))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, p: EnvdProcess) -> None:
        code = -1
        try:
            async for kind, data in p.proc.output():
                p._publish(Output("pty" if p.pty else "stdout" if kind == 1 else "stderr", data))
                await p._caught_up()
            code = await p.proc.wait()
        finally:
            p.ended = Output("end", exit_code=code)
            p._publish(p.ended)
            p._listeners.clear()
            self._running.get(p.box_id, {}).pop(p.pid, None)
            await p.proc.close()

    def listed(self, box_id: str) -> list[EnvdProcess]:
        return list(self._running.get(box_id, {}).values())

    def find(self, box_id: str, pid: int | None = None, tag: str | None = None) -> EnvdProcess:
        for p in self._running.get(box_id, {}).values():
            if (pid is not None and p.pid == pid) or (tag is not None and p.tag == tag):
                return p
        which = f"pid {pid}" if pid is not None else f"tag {tag!r}"
        raise NotFound(f"no running process with {which}")

    async def events(
        self, p: EnvdProcess, queue: Listener, keepalive: float
    ) -> AsyncIterator[Output | None]:
        """Its output until it ends; None every `keepalive` seconds of quiet, so proxies
        and the SDK see the stream alive. CapacityExceeded once the stream was let go for
        reading nothing while far behind."""
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), keepalive)
                except asyncio.TimeoutError:
                    yield None
                    continue
                if item is _BEHIND:
                    raise CapacityExceeded(
                        f"this stream read nothing while {MAX_BEHIND >> 20} MiB behind process "
                        f"{p.pid}'s output and was ended; the process runs on (connect to it "
                        "again to read what it prints from now on)"
                    )
                yield item
                if item.kind == "end":
                    return
        finally:
            p.unsubscribe(queue)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
