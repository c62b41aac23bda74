"""Box changes as they happen, for the dashboard's live list: the box store reports which
box changed, and each listener gets the boxes it may see, as they now are.

The store only says "box X changed" (`BoxChanges.changed`, called after every write);
what the box now is, and whether a listener may see it, is read again per listener, so a
member never learns anything of a box that is not theirs: not its name, not that it
changed, not that it went away (a removal is told only to a listener that was shown the
box before)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..domain.accounts import User, sees
from ..domain.box import Box, BoxState
from ..domain.webhooks import Event
from .boxes import BoxService

# Changes of one box often come in bursts (creating, then running; a snapshot, then its
# count): gathered for this long, a listener gets one event per box.
SETTLE = 0.2
# A listener that falls this far behind (a stalled browser) is ended; it reconnects and
# starts from a fresh list.
BACKLOG = 10_000


class BoxChanges:
    """Where the store reports writes; every listener has its own queue of box ids."""

    def __init__(self) -> None:
        # Weakly held: a stream that ended before it first ran (its client gone at once)
        # never unsubscribes; its queue goes with it.
        self._queues: weakref.WeakSet[asyncio.Queue[str]] = weakref.WeakSet()

    def changed(self, box_id: str) -> None:
        for queue in list(self._queues):
            if queue.qsize() >= BACKLOG:
                self._queues.discard(queue)
                queue.put_nowait("")  # ends its `batches`
            else:
                queue.put_nowait(box_id)

    def subscribe(self) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        self._queues.discard(queue)

    @property
    def listeners(self) -> int:
        return len(self._queues)


async def batches(queue: asyncio.Queue[str]) -> AsyncIterator[set[str]]:
    """The ids of the boxes that changed, a settled batch at a time, until the listener
    fell too far behind."""
    while True:
        batch = {await queue.get()}
        await asyncio.sleep(SETTLE)
        while not queue.empty():
            batch.add(queue.get_nowait())
        if "" in batch:
            return
        yield batch


@dataclass(frozen=True)
class BoxEvent:
    """A box as it now is (`box`), or gone from the listener's view (`box` None)."""

    box_id: str
    box: Box | None


class Happenings(Protocol):
    """Where typed events can be listened to (services/box_events.py)."""

    def listen(self) -> asyncio.Queue[Event | None]: ...
    def unlisten(self, queue: asyncio.Queue[Event | None]) -> None: ...


class EventService:
    def __init__(
        self, changes: BoxChanges, boxes: BoxService, happenings: Happenings | None = None
    ) -> None:
        self._changes = changes
        self._boxes = boxes
        self._happenings = happenings

    async def follow(self, caller: User) -> tuple[list[Box], AsyncIterator[BoxEvent | Event]]:
        """The boxes `caller` sees now and every change to them after (BoxEvent), and the
        typed events of those boxes (Event): subscribed before the list is read, so no
        change falls in between. The caller must iterate the second (that is what
        unsubscribes)."""
        queue = self._changes.subscribe()
        typed = self._happenings.listen() if self._happenings else None
        try:
            boxes = await self._boxes.listed(caller)
        except BaseException:
            self._changes.unsubscribe(queue)
            if typed is not None and self._happenings:
                self._happenings.unlisten(typed)
            raise
        return boxes, self._events(caller, {b.id for b in boxes}, queue, typed)

    async def _events(
        self,
        caller: User,
        shown: set[str],
        queue: asyncio.Queue[str],
        typed: asyncio.Queue[Event | None] | None,
    ) -> AsyncIterator[BoxEvent | Event]:
        changed = batches(queue)
        waits: dict[asyncio.Future[Any], str] = {}
        try:
            while True:
                if "changes" not in waits.values():
                    waits[asyncio.ensure_future(anext(changed))] = "changes"
                if typed is not None and "typed" not in waits.values():
                    waits[asyncio.ensure_future(typed.get())] = "typed"
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: waits[f]):
                    source = waits.pop(future)
                    try:
                        got = future.result()
                    except StopAsyncIteration:
                        return  # fell too far behind: the listener starts again
                    if source == "typed":
                        if got is None:
                            return  # fell too far behind
                        if sees(caller, got.owner_id):
                            yield got
                        continue
                    for box_id in sorted(got):
                        event = await self._event(caller, box_id, shown)
                        if event is not None:
                            yield event
        finally:
            for future in waits:
                future.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*waits, return_exceptions=True)
            await changed.aclose()  # type: ignore[attr-defined]
            self._changes.unsubscribe(queue)
            if typed is not None and self._happenings:
                self._happenings.unlisten(typed)

    async def _event(self, caller: User, box_id: str, shown: set[str]) -> BoxEvent | None:
        box = await self._boxes.get(box_id)
        # As `BoxService.listed` shows boxes: the caller's own, not those being deleted.
        if box is not None and box.state != BoxState.DELETING and sees(caller, box.owner_id):
            shown.add(box_id)
            return BoxEvent(box_id, box)
        if box_id in shown:
            shown.discard(box_id)
            return BoxEvent(box_id, None)
        return None
