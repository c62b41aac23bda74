"""Agent runs: `paddock prompt` runs a coding agent headless in a box, with only the key
its provider needs, and keeps going when the client goes away. Each run is a row in the
store and an append-only log of output events (`runs/<id>.log` in the data folder);
followers get the log so far, then the rest live. A log cut short by a crash is read up
to its last whole line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from ..domain.accounts import User
from ..domain.agents import AGENTS
from ..domain.errors import InvalidRequest, InvalidState, NotFound
from ..domain.runs import Run, headless
from ..runtime import inbox
from ..runtime.base import ExecProcess
from ..store.runs import RunRepository
from .boxes import BoxService, box_path
from .credentials import CredentialService

log = logging.getLogger("paddockd.runs")

# The agent runs in its own session, its pid noted in the box (runtime/inbox.py), so `stop`
# ends the agent and everything it started.
# What a run's log keeps of its output, on the server's own disk: the agent and all it
# runs are the box's programs, and print as much as they like. Past this the run goes on,
# its output no longer kept nor sent to followers, and the log says so.
MAX_LOG = 32 << 20
# What a box's runs may hold on that disk together: starting a run forgets the box's oldest
# ended runs (record and log) past these. With MAX_RUNNING at once, a box holds at most
# LOG_BUDGET + MAX_RUNNING x MAX_LOG there.
MAX_RUNS = 50
LOG_BUDGET = 96 << 20
MAX_RUNNING = 4
_READ = 1 << 20


class KeyHolds(Protocol):
    """The credential gateway's grants for runs (services/gateway.py)."""

    def hold(self, box_id: str, providers: list[str]) -> None: ...

    def release(self, box_id: str, providers: list[str]) -> None: ...


class RunService:
    def __init__(
        self,
        boxes: BoxService,
        credentials: CredentialService,
        repo: RunRepository,
        runs_dir: Path,
        default_agent: str = "claude",
        holds: KeyHolds | None = None,
    ) -> None:
        self._boxes = boxes
        self._credentials = credentials
        self._holds = holds
        self._repo = repo
        self._dir = runs_dir
        self.default_agent = default_agent
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Told of each run's end (its run.finished event: services/box_events.py).
        self.finished: Callable[[str, str, str, int | None], Awaitable[None]] = _nothing
        self._followers: defaultdict[str, set[asyncio.Queue[dict[str, object] | None]]] = (
            defaultdict(set)
        )

    # -- records ------------------------------------------------------------------------
    def _log(self, run_id: str) -> Path:
        return self._dir / f"{run_id}.log"

    async def get(self, run_id: str, caller: User | None = None) -> Run:
        run = await self._repo.get(run_id) if run_id.isalnum() else None
        if run is None or not await self._boxes.visible(run.box_id, caller):
            raise NotFound(f"no run {run_id!r}")
        return run

    async def list(self, ref: str, caller: User | None = None) -> list[Run]:
        box = await self._boxes.resolve(ref, caller)
        return await self._repo.for_box(box.id)

    async def recover(self) -> tuple[str, ...]:
        """At start-up: import the records older versions kept as files, and mark runs that
        were going when paddockd stopped as lost (no one is reading them now). Returns the
        files that were skipped, each with why; they are renamed `*.broken`."""
        self._dir.mkdir(parents=True, exist_ok=True)
        found, skipped = await anyio.to_thread.run_sync(read_legacy_records, self._dir)
        await self._repo.add_missing(list(found.values()))
        # Only once the rows are committed: a crash before this imports them again.
        await anyio.to_thread.run_sync(_remove, list(found))
        for why in skipped:
            log.warning("skipped a run record: %s", why)
        for run in await self._repo.running():
            if run.id not in self._tasks:
                await self._repo.save(replace(run, status="lost", ended_at=time.time()))
        return tuple(skipped)

    # -- running ------------------------------------------------------------------------
    async def start(
        self,
        ref: str,
        agent: str | None,
        instruction: str,
        workdir: str | None,
        model: str | None,
        as_json: bool = False,
        caller: User | None = None,
    ) -> Run:
        box = await self._boxes.running(ref, caller)
        going = [r for r in await self._repo.for_box(box.id) if r.status == "running"]
        if len(going) >= MAX_RUNNING:
            raise InvalidState(
                f"box {box.name} has {len(going)} runs going (at most {MAX_RUNNING} at once): "
                "wait for one, or stop one (`paddock runs BOX`)"
            )
        name = agent or box.agent or self.default_agent
        headless(name, instruction, model, as_json)  # bad input is refused before keys are read
        providers = list(AGENTS[name].providers)
        # The box owner's keys, whoever starts the run (see services/credentials.py).
        env = await self._credentials.env_for(box, providers)
        if not env:
            hint = await self._credentials.hint(box, caller, providers[0])
            raise InvalidRequest(f"{name} needs an API key for {' or '.join(providers)}: {hint}")
        env = AGENTS[name].adapt(env)
        cmd = headless(name, instruction, model, as_json, env)
        run = Run(
            id=secrets.token_hex(6),
            box_id=box.id,
            box_name=box.name,
            agent=name,
            instruction=instruction,
            workdir=box_path(workdir or "/config"),
            model=model,
            status="running",
            started_at=time.time(),
        )
        self._dir.mkdir(parents=True, exist_ok=True)
        await self._prune(box.id)
        await self._repo.save(run)
        # -w: setsid forks when the caller leads its group (an exec does); wait for it.
        launch = ["setsid", "-w", *inbox.noted(f"run-{run.id}", cmd, AGENTS[name].prepare)]
        if self._holds is not None:
            self._holds.hold(box.id, providers)  # its placeholders are good while it runs
        try:
            proc = await self._boxes.exec(box.id, launch, env, run.workdir, None)
        except BaseException:
            if self._holds is not None:
                self._holds.release(box.id, providers)
            raise
        self._tasks[run.id] = asyncio.create_task(self._pump(run, proc))
        return run

    async def _pump(self, run: Run, proc: ExecProcess) -> None:
        """Owns the agent's output for the run's whole life, whoever is listening."""
        log = await anyio.to_thread.run_sync(lambda: self._log(run.id).open("ab"))
        code: int | None = None
        seq = 0
        kept = 0
        try:
            async for kind, data in proc.output():
                if kept > MAX_LOG:
                    continue  # read, so the agent is not held up, and let go
                seq += 1
                stream = "stdout" if kind == 1 else "stderr"
                event = {"seq": seq, "stream": stream, "data": data.decode(errors="replace")}
                line = json.dumps(event).encode() + b"\n"
                kept += len(line)
                if kept > MAX_LOG:
                    note = f"[paddock: the run printed over {MAX_LOG >> 20} MiB; no more is kept]\n"
                    event = {"seq": seq, "stream": "stderr", "data": note}
                    line = json.dumps(event).encode() + b"\n"
                log.write(line)
                log.flush()
                self._publish(run.id, event)
            code = await proc.wait()
        finally:
            await proc.close()
            if self._holds is not None:
                self._holds.release(run.box_id, list(AGENTS[run.agent].providers))
            current = await self.get(run.id)
            status = (
                current.status
                if current.status == "stopped"
                else ("succeeded" if code == 0 else "failed")
            )
            done = replace(current, status=status, exit_code=code, ended_at=time.time())
            # The record first: whoever sees the end in the log then finds the run ended.
            await self._repo.save(done)
            end: dict[str, object] = {"seq": seq + 1, "status": done.status, "exit_code": code}
            log.write(json.dumps(end).encode() + b"\n")
            log.close()
            self._publish(run.id, end)
            self._publish(run.id, None)
            self._tasks.pop(run.id, None)
            await self.finished(done.box_id, done.id, done.status, code)

    def _publish(self, run_id: str, event: dict[str, object] | None) -> None:
        for queue in self._followers.get(run_id, ()):
            queue.put_nowait(event)

    async def follow(
        self, run_id: str, live: bool = True, caller: User | None = None
    ) -> AsyncIterator[dict[str, object]]:
        """The run's log so far, then (if `live`) what comes, until the run ends."""
        run = await self.get(run_id, caller)
        queue: asyncio.Queue[dict[str, object] | None] = asyncio.Queue()
        self._followers[run_id].add(queue)
        try:
            ended, last = False, 0
            async for event in _logged(self._log(run_id)):
                ended, last = ended or "status" in event, event["seq"]
                yield event
            if not ended and run.status != "running" and run_id not in self._tasks:
                # Its log lost the end (paddockd stopped mid-run): the record still knows.
                yield {"seq": last + 1, "status": run.status, "exit_code": run.exit_code}
                ended = True
            while live and not ended:
                if run_id not in self._tasks and queue.empty():
                    break  # it ended before we looked, and its last events are in the file
                item = await queue.get()
                if item is None:
                    break
                if int(str(item.get("seq", 0))) > last:  # not already read from the file
                    yield item
        finally:
            followers = self._followers[run_id]
            followers.discard(queue)
            if not followers:  # one entry per run ever followed would pile up otherwise
                del self._followers[run_id]

    async def _prune(self, box_id: str) -> None:
        """Forget the box's oldest ended runs until what is left fits its budget."""
        ended = [r for r in await self._repo.for_box(box_id) if r.status != "running"]
        sizes = await anyio.to_thread.run_sync(lambda: [_size(self._log(r.id)) for r in ended])
        total, count = sum(sizes), len(ended)
        for run, size in zip(ended, sizes, strict=True):  # oldest first
            if total <= LOG_BUDGET and count < MAX_RUNS:
                break
            await self._forget(run.id)
            total, count = total - size, count - 1

    async def _forget(self, run_id: str) -> None:
        await self._repo.delete(run_id)
        await anyio.to_thread.run_sync(_remove, [self._log(run_id)])

    async def sweep(self) -> int:
        """Forget the runs of boxes that are gone (their records and logs went nowhere with
        them before); how many."""
        boxes = {b.id for b in await self._boxes.all()}
        gone = [
            r for r in await self._repo.all() if r.box_id not in boxes and r.id not in self._tasks
        ]
        for run in gone:
            await self._forget(run.id)
        return len(gone)

    async def stop(self, run_id: str, caller: User | None = None) -> Run:
        """TERM to the agent's process group; KILL if it is still there 5 s later."""
        run = await self.get(run_id, caller)
        if run.status != "running":
            return run
        await self._repo.save(replace(run, status="stopped"))
        task = self._tasks.get(run_id)
        for signal, grace in (("TERM", 5), ("KILL", 10)):
            await self._boxes.signal(run.box_id, f"run-{run_id}", signal)
            if task is None:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), grace)
                break
        return await self.get(run_id)


def read_legacy_records(runs_dir: Path) -> tuple[dict[Path, Run], list[str]]:
    """The `<id>.json` records of older versions. One that cannot be read whole (a crash
    mid-write) is renamed aside, so it is reported once and never blocks a start."""
    found: dict[Path, Run] = {}
    skipped: list[str] = []
    for path in sorted(runs_dir.glob("*.json")):
        try:
            found[path] = Run.from_json(path.read_text())
        except (OSError, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
            skipped.append(f"{path.name}: {exc}")
            with contextlib.suppress(OSError):
                path.rename(path.with_name(path.name + ".broken"))
    return found, skipped


def read_events(text: str) -> list[dict[str, Any]]:
    """A run's log events; a line that is not a whole event (cut short by a crash) is
    left out."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("seq"), int):
            events.append(event)
    return events


async def _logged(path: Path) -> AsyncIterator[dict[str, Any]]:
    """A run's log events as they stand in its file, read a piece at a time (a log is up
    to MAX_LOG; a reader once made paddockd hold one whole, 360 MiB more)."""
    try:
        f = await anyio.to_thread.run_sync(lambda: path.open("rb"))
    except FileNotFoundError:
        return
    try:
        rest = b""
        while piece := await anyio.to_thread.run_sync(f.read, _READ):
            lines = (rest + piece).split(b"\n")
            rest = lines.pop()
            for event in read_events(b"\n".join(lines).decode(errors="replace")):
                yield event
        for event in read_events(rest.decode(errors="replace")):
            yield event
    finally:
        await anyio.to_thread.run_sync(f.close)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


async def _nothing(box_id: str, run_id: str, status: str, exit_code: int | None) -> None:
    return None
