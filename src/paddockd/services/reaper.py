"""The reaper: boxes past their deadline are stopped (snapshot kept) or deleted; boxes
unused for their idle time are stopped; previews past their time are removed.

Deadlines live in the store, so a paddockd restart loses none; the first pass after a
restart reaps whatever expired while it was down. Use is known only since paddockd
started (services/activity.py): a restart gives every box its whole idle time again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..domain.box import Box, BoxState, Desired
from ..domain.errors import PaddockError
from .boxes import BoxService
from .previews import PreviewService

log = logging.getLogger("paddockd.reaper")


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

    async def reap(self) -> list[str]:
        now = self._now()
        reaped = []
        for box in await self._boxes.all():
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
        try:
            await self._boxes.stop(box.id)
        except PaddockError as exc:
            log.error("could not stop idle box %s: %s", box.name, exc.message)
            return False
        self._boxes.activity.forget(box.id)
        return True
