"""The reaper: boxes past their deadline are stopped (snapshot kept) or deleted; boxes
unused for their idle time are stopped; previews past their time are removed.

Deadlines live in the store, so a paddockd restart loses none; the first pass after a
restart reaps whatever expired while it was down. A pass runs when the next deadline falls
due (so a box is reaped on time, not up to a pass late), when a box changed (a deadline
set anew), and at least every `interval` for idle stops and previews. Use is known only
since paddockd started (services/activity.py): a restart gives every box its whole idle
time again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from ..domain.box import Box, BoxState, Desired
from ..domain.errors import PaddockError
from .boxes import BoxService
from .events import BoxChanges
from .previews import PreviewService

log = logging.getLogger("paddockd.reaper")
# Passes are this far apart at least: a storm of box changes is not a pass each.
MIN_GAP = 0.25


class Reaper:
    def __init__(
        self,
        boxes: BoxService,
        now: Callable[[], datetime],
        previews: PreviewService | None = None,
    ) -> None:
        self._boxes = boxes
        self._now = now
        self._previews = previews
        # Where the store reports box writes (services/events.py): set by the composition
        # root, listened to while the reaper runs.
        self.changes: BoxChanges | None = None
        self._next_due = float("inf")  # seconds from the last pass to the next deadline

    async def run(self, interval: float) -> None:
        """Pass after pass until cancelled (a failed pass is logged, not fatal)."""
        queue = self.changes.subscribe() if self.changes is not None else asyncio.Queue[str]()
        try:
            while True:
                try:
                    await self.reap()
                except PaddockError as exc:
                    log.error("ttl reaper: %s", exc.message)
                except Exception:
                    log.exception("ttl reaper failed")
                wait = max(MIN_GAP, min(interval, self._next_due))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(queue.get(), wait)
                    await asyncio.sleep(MIN_GAP)
                while not queue.empty():
                    queue.get_nowait()
        finally:
            if self.changes is not None:
                self.changes.unsubscribe(queue)

    async def reap(self) -> list[str]:
        now = self._now()
        reaped = []
        self._next_due = float("inf")
        for box in await self._boxes.all():
            if box.desired == Desired.RUNNING and box.expires_at is not None:
                left = (box.expires_at - now).total_seconds()
                if left > 0:  # the next pass is due when the soonest of these is
                    self._next_due = min(self._next_due, left)
            if (
                box.desired == Desired.RUNNING
                and box.expires_at is not None
                and box.expires_at <= now
            ):
                log.info("box %s reached its TTL: %s", box.name, box.ttl_action.value)
                try:
                    await self._boxes.expire(box)
                    reaped.append(box.name)
                except PaddockError as exc:
                    log.error(
                        "could not %s expired box %s: %s",
                        box.ttl_action.value,
                        box.name,
                        exc.message,
                    )
            elif box.state == BoxState.RUNNING and await self._stop_if_idle(box):
                reaped.append(box.name)
        if self._previews is not None:
            await self._previews.sweep()
        return reaped

    async def _stop_if_idle(self, box: Box) -> bool:
        idle = self._boxes.activity.idle_for(box.id)
        if box.desired != Desired.RUNNING or not box.idle_stop or idle < box.idle_stop:
            return False
        log.info("box %s unused for %.0f s: stopping it", box.name, idle)
        self._boxes.stop_reasons[box.id] = "idle"
        try:
            await self._boxes.stop(box.id)
        except PaddockError as exc:
            self._boxes.stop_reasons.pop(box.id, None)
            log.error("could not stop idle box %s: %s", box.name, exc.message)
            return False
        self._boxes.activity.forget(box.id)
        return True
