"""The TTL reaper: boxes past their deadline are stopped (snapshot kept) or deleted.

Deadlines live in the store, so a paddockd restart loses none; the first pass after a
restart reaps whatever expired while it was down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ..domain.box import Desired
from ..domain.errors import PaddockError
from .boxes import BoxService

log = logging.getLogger("paddockd.reaper")


class Reaper:
    def __init__(self, boxes: BoxService, now: Callable[[], datetime]) -> None:
        self._boxes = boxes
        self._now = now

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
        return reaped
