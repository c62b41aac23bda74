"""Typed events about boxes (domain/webhooks.py `Event`), told by the box store as it
writes (store/boxes.py `StoreWatcher`): a box made is `box.created`; its state becoming
`running`, `box.started`; `stopped`, `box.stopped` (why: its TTL, unused for its idle
time, or a user's call); `error`, `box.error`; its row removed, `box.deleted`; a snapshot
written, `snapshot.taken`. A run's end is told by the runs (`run_finished`); a
destination or name the box's policy refused, by the egress log (`egress_refused`): once
a minute per destination, and at most EGRESS_PER_MINUTE a minute per box, so a box that
tries the whole internet cannot flood its owner's webhooks.

The store tells each write at once and in order; the events go to `publish` (the
webhooks) one at a time from one queue, so a box's events are published in the order
they happened."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import replace

from paddock.wire.models import EgressEvent

from ..domain.box import Box, BoxState
from ..domain.snapshot import Snapshot
from ..domain.webhooks import Event
from .boxes import BoxService
from .events import BACKLOG

log = logging.getLogger(__name__)

EGRESS_PER_MINUTE = 10  # egress.refused events of one box
_TOLD_AT_MOST = 10_000  # destinations remembered in all, for the once-a-minute rule

Publish = Callable[[Event], Awaitable[None]]


def _event(box: Box, event_type: str, **data: str | int | None) -> Event:
    return Event(
        secrets.token_hex(8), event_type, time.time(), box.id, box.name, box.owner_id, data
    )


class BoxEvents:
    def __init__(self, boxes: BoxService, publish: Publish) -> None:
        self._boxes = boxes
        self._publish = publish
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._known: dict[str, Box] = {}  # the last seen of each box: a removal names it
        # /v1/events streams; weakly held, as services/events.py's queues are.
        self._listeners: weakref.WeakSet[asyncio.Queue[Event | None]] = weakref.WeakSet()
        # (box, kind, destination) -> when its refusal was last told; box -> this minute's.
        self._refusals: dict[tuple[str, str, str, int], float] = {}
        self._minute: dict[str, tuple[int, int]] = {}

    # -- told by the store (store/boxes.py) -----------------------------------------------
    def added(self, box: Box) -> None:
        self._known[box.id] = box
        self._queue.put_nowait(_event(box, "box.created", type=box.type))

    def moved(self, before: Box, after: Box) -> None:
        # The writer's copy may be older than the row in other fields: only the state and
        # its message are taken from it.
        known = self._known.get(after.id)
        if known is not None:
            if known.state == after.state:
                return  # the writer's copy was older than what was told already
            after = replace(known, state=after.state, message=after.message)
        self._known[after.id] = after
        if after.state == BoxState.RUNNING:
            self._queue.put_nowait(_event(after, "box.started"))
        elif after.state == BoxState.STOPPED:
            reason = self._boxes.stop_reasons.pop(after.id, "user")
            self._queue.put_nowait(
                _event(after, "box.stopped", reason=reason, message=after.message)
            )
        elif after.state == BoxState.ERROR:
            self._queue.put_nowait(_event(after, "box.error", message=after.message))

    def removed(self, box_id: str) -> None:
        self._minute.pop(box_id, None)
        box = self._known.pop(box_id, None)
        self._boxes.stop_reasons.pop(box_id, None)
        if box is not None:
            self._queue.put_nowait(_event(box, "box.deleted"))

    def snapshot_added(self, snap: Snapshot) -> None:
        box = self._known.get(snap.box_id)
        if box is not None:
            self._queue.put_nowait(
                _event(box, "snapshot.taken", seq=snap.seq, kind=snap.kind, label=snap.label)
            )

    # -- told by the egress log ---------------------------------------------------------
    def egress_refused(self, box_id: str, refused: EgressEvent) -> None:
        box = self._known.get(box_id)
        if box is None:
            return
        now = time.monotonic()
        target = refused.name or refused.address
        key = (box_id, refused.kind, target, refused.port)
        if now - self._refusals.get(key, -60.0) < 60:
            return
        minute, told = self._minute.get(box_id, (0, 0))
        if minute != int(now // 60):
            minute, told = int(now // 60), 0
        if told >= EGRESS_PER_MINUTE:
            return
        self._minute[box_id] = (minute, told + 1)
        if len(self._refusals) >= _TOLD_AT_MOST:
            self._refusals = {k: at for k, at in self._refusals.items() if now - at < 60}
            if len(self._refusals) >= _TOLD_AT_MOST:
                return
        self._refusals[key] = now
        data: dict[str, str | int | None] = {"kind": refused.kind, "target": target}
        if refused.kind == "connect":
            data.update(address=refused.address, port=refused.port, proto=refused.proto)
        self._queue.put_nowait(_event(box, "egress.refused", **data))

    # -- told by the runs ---------------------------------------------------------------
    async def run_finished(
        self, box_id: str, run_id: str, status: str, exit_code: int | None
    ) -> None:
        box = self._known.get(box_id) or await self._boxes.get(box_id)
        if box is not None:
            self._queue.put_nowait(
                _event(box, "run.finished", run=run_id, status=status, exit_code=exit_code)
            )

    # -- out ------------------------------------------------------------------------------
    def listen(self) -> asyncio.Queue[Event | None]:
        """Every event from now on (services/events.py filters what each may see)."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._listeners.add(queue)
        return queue

    def unlisten(self, queue: asyncio.Queue[Event | None]) -> None:
        self._listeners.discard(queue)

    def _to_listeners(self, event: Event) -> None:
        for queue in list(self._listeners):
            if queue.qsize() >= BACKLOG:
                # A stalled stream: ended (None), it reconnects and starts afresh.
                self._listeners.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)

    async def run(self) -> None:
        """Publish what comes, in order, until cancelled (a background task of paddockd's).
        Boxes made before it started are known from the store, so their removal names them."""
        for box in await self._boxes.all():
            self._known.setdefault(box.id, box)
        while True:
            event = await self._queue.get()
            self._to_listeners(event)
            try:
                await self._publish(event)
            except Exception:  # an event not told must never stop the others
                log.exception("event %s of box %s was not published", event.type, event.box_id)
