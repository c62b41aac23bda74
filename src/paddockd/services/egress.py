"""Each box's egress log: the names it looked up and the destinations it tried, with the
verdict, kept as JSON lines in the box's folder, and an allowlist proposed from it.

DNS verdicts arrive from the resolver as they happen; connection attempts are read from
the rules' counters every second. Followers get both live.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import anyio.to_thread

# The log's entries are the API's own (a plain dataclass shared with the client).
from paddock.wire.models import EgressEvent, Verdict

from ..domain.accounts import User
from ..netpolicy.base import Flow
from .boxes import BoxService

MAX_LOG_BYTES = 2 * 1024 * 1024
NEVER_ALLOWABLE = ("169.254.",)  # metadata: refused whatever the policy


def line(event: EgressEvent) -> str:
    return json.dumps(asdict(event))


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def parse(text: str) -> EgressEvent | None:
    """One logged event; None for a line that is not one (cut short by a crash)."""
    try:
        data = json.loads(text)
        return EgressEvent(**data) if isinstance(data, dict) else None
    except (ValueError, TypeError):
        return None


class EgressLog:
    def __init__(self, boxes_dir: Path, now: Callable[[], datetime]) -> None:
        self._dir = boxes_dir
        self._now = now
        self._unwritten: defaultdict[str, list[EgressEvent]] = defaultdict(list)
        self._names: defaultdict[str, dict[str, str]] = defaultdict(dict)
        self._followers: defaultdict[str, set[asyncio.Queue[EgressEvent]]] = defaultdict(set)
        # Reads see the file and the unwritten events as one: never mid-flush.
        self._lock = asyncio.Lock()
        # Told of each event as it is recorded (the metrics' egress counter).
        self.seen: Callable[[str, str], None] = lambda kind, verdict: None
        # Told each refusal (services/box_events.py makes events of a few of them).
        self.refused: Callable[[str, EgressEvent], None] = lambda box_id, event: None

    def path(self, box_id: str) -> Path:
        return self._dir / box_id / "egress.jsonl"

    # -- recording ----------------------------------------------------------------------
    def dns(self, box_id: str, name: str, verdict: Verdict, addresses: list[str]) -> None:
        for address in addresses:
            self._names[box_id][address] = name
        self._add(box_id, EgressEvent(self._stamp(), "dns", verdict, name, ", ".join(addresses)))

    def connections(self, flows: list[Flow], box_of: Callable[[str], str | None]) -> None:
        for flow in flows:
            box_id = box_of(flow.box_ip)
            if box_id is None:
                continue
            name = self._names[box_id].get(flow.address, "")
            self._add(
                box_id,
                EgressEvent(
                    self._stamp(),
                    "connect",
                    flow.verdict,
                    name,
                    flow.address,
                    flow.port,
                    flow.proto,
                    flow.count,
                ),
            )

    def _stamp(self) -> str:
        return self._now().isoformat(timespec="seconds")

    def _add(self, box_id: str, event: EgressEvent) -> None:
        self.seen(event.kind, event.verdict)
        if event.verdict == "refused":
            self.refused(box_id, event)
        self._unwritten[box_id].append(event)
        for queue in self._followers.get(box_id, ()):
            queue.put_nowait(event)

    async def flush(self) -> None:
        """Write what was recorded since the last flush (off the event loop)."""
        async with self._lock:
            batch, self._unwritten = self._unwritten, defaultdict(list)
            if batch:
                await anyio.to_thread.run_sync(self._write, batch)

    def _write(self, batch: dict[str, list[EgressEvent]]) -> None:
        for box_id, events in batch.items():
            path = self.path(box_id)
            if not path.parent.exists():
                continue  # the box is gone
            if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
                # Keep the newer half: the log is for recent behaviour. Replaced whole, so
                # a crash mid-way leaves the old log or the new one.
                lines = path.read_text(errors="replace").splitlines(keepends=True)
                half = path.with_name(path.name + ".new")
                half.write_text("".join(lines[len(lines) // 2 :]))
                half.replace(path)
            # A crash mid-line left a torn last line: new events start on a line of their own.
            torn = path.exists() and path.stat().st_size > 0 and not _ends_a_line(path)
            with path.open("a") as f:
                f.writelines(["\n"] * torn + [line(e) + "\n" for e in events])

    # -- reading ------------------------------------------------------------------------
    async def read(self, box_id: str, limit: int = 0) -> list[EgressEvent]:
        events, _ = await self._read(box_id, limit, follow=False)
        return events

    async def follow(
        self, box_id: str, limit: int = 0
    ) -> tuple[list[EgressEvent], AsyncIterator[EgressEvent]]:
        """The log so far and every event after it, none lost or repeated in between.
        The caller must iterate the second (that is what unsubscribes)."""
        events, queue = await self._read(box_id, limit, follow=True)
        assert queue is not None
        return events, self._drain(box_id, queue)

    async def _read(
        self, box_id: str, limit: int, follow: bool
    ) -> tuple[list[EgressEvent], asyncio.Queue[EgressEvent] | None]:
        def load() -> list[EgressEvent]:
            path = self.path(box_id)
            text = path.read_text(errors="replace") if path.exists() else ""
            return [event for line in text.splitlines() if (event := parse(line)) is not None]

        async with self._lock:
            events = [*await anyio.to_thread.run_sync(load), *self._unwritten.get(box_id, [])]
            queue: asyncio.Queue[EgressEvent] | None = None
            if follow:
                queue = asyncio.Queue()
                self._followers[box_id].add(queue)
        return (events[-limit:] if limit else events), queue

    async def _drain(
        self, box_id: str, queue: asyncio.Queue[EgressEvent]
    ) -> AsyncIterator[EgressEvent]:
        try:
            while True:
                yield await queue.get()
        finally:
            self._followers[box_id].discard(queue)


def suggest(events: list[EgressEvent], exclude: frozenset[str] = frozenset()) -> list[str]:
    """An allowlist covering what the box used: the names it resolved (three or more
    siblings become a `*.` wildcard) and the addresses it reached without a name, less
    `exclude` (the host's own addresses, which no policy opens)."""
    names = {e.name for e in events if e.kind == "dns" and e.name}
    named = {a for e in events if e.kind == "dns" for a in e.address.split(", ") if a}
    addresses = {
        f"{e.address}/32"
        for e in events
        if e.kind == "connect"
        and e.address
        and not e.name
        and e.address not in named
        and e.address not in exclude
        and not e.address.startswith(NEVER_ALLOWABLE)
        and e.port != 53
    }
    by_parent: defaultdict[str, set[str]] = defaultdict(set)
    for name in names:
        parent = name.split(".", 1)[1] if name.count(".") >= 2 else ""
        if parent:
            by_parent[parent].add(name)
    wild = {p for p, kids in by_parent.items() if len(kids) >= 3}
    kept = {n for n in names if not any(n.endswith("." + p) for p in wild)}
    return sorted(kept) + sorted(f"*.{p}" for p in wild) + sorted(addresses)


class EgressService:
    """The egress log and suggestions, by box name or id."""

    def __init__(self, boxes: BoxService, log: EgressLog, host_addresses: frozenset[str]) -> None:
        self._boxes = boxes
        self._log = log
        self._host = host_addresses

    async def events(
        self, ref: str, limit: int = 0, caller: User | None = None
    ) -> list[EgressEvent]:
        return await self._log.read((await self._boxes.resolve(ref, caller)).id, limit)

    async def follow(
        self, ref: str, limit: int = 0, caller: User | None = None
    ) -> tuple[list[EgressEvent], AsyncIterator[EgressEvent]]:
        return await self._log.follow((await self._boxes.resolve(ref, caller)).id, limit)

    async def suggest(self, ref: str, caller: User | None = None) -> tuple[list[str], int]:
        """The proposed allowlist, and how many log entries it is based on."""
        events = await self.events(ref, caller=caller)
        return suggest(events, self._host), len(events)
