"""A short history of what boxes use, CPU and memory every few seconds, for E2B's
`get_metrics(start, end)` (services/e2b/service.py).

Only the boxes `wanted` names are read (E2B's sandboxes), each with a cheap cgroup reading
(runtime `samples`: no engine call but after a start), so an idle server with hundreds of
other boxes pays nothing for it. Kept in memory, the last hour of each: a restart of
paddockd starts the history again."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..domain.box import BoxState
from ..runtime.base import Runtime
from ..runtime.cgroups import Sample, cpu_percent
from .boxes import BoxService

INTERVAL = 5.0  # seconds between readings
KEEP = 720  # readings kept per box: an hour of them


@dataclass(frozen=True)
class Point:
    at: datetime
    cpu_percent: float  # 100 per CPU, as `paddock stats` says
    memory_bytes: int
    memory_limit_bytes: int | None


class UsageHistory:
    def __init__(
        self,
        boxes: BoxService,
        runtime: Runtime,
        now: Callable[[], datetime],
        wanted: Callable[[], Awaitable[set[str]]],
        keep: int = KEEP,
    ) -> None:
        self._boxes = boxes
        self._rt = runtime
        self._now = now
        self._wanted = wanted
        self._keep = keep
        self._points: dict[str, deque[Point]] = {}
        # box -> (its container, the last reading): CPU % is between two of one container.
        self._last: dict[str, tuple[str, Sample]] = {}

    async def sample(self) -> None:
        wanted = await self._wanted()
        running = {
            b.id: b.container_id
            for b in await self._boxes.all()
            if b.id in wanted and b.state == BoxState.RUNNING and b.container_id
        }
        readings = await self._rt.samples([cid for cid in running.values() if cid])
        at = self._now()
        for box_id, cid in running.items():
            now = readings.get(cid or "")
            if now is None:
                continue
            before = self._last.get(box_id)
            self._last[box_id] = (cid or "", now)
            if before is None or before[0] != cid:
                continue  # the first reading of this container: no CPU % yet
            point = Point(at, cpu_percent(before[1], now), now.memory_bytes, now.memory_limit_bytes)
            self._points.setdefault(box_id, deque(maxlen=self._keep)).append(point)
        # A box no longer wanted (deleted) takes its history with it; a paused one keeps it.
        for gone in set(self._points) - wanted:
            del self._points[gone]
        for gone in set(self._last) - set(running):
            del self._last[gone]

    def points(
        self, box_id: str, start: datetime | None = None, end: datetime | None = None
    ) -> list[Point]:
        # The last hour's: a paused sandbox's older readings are not shown as recent.
        oldest = self._now() - timedelta(seconds=INTERVAL * self._keep)
        since = max(start, oldest) if start is not None else oldest
        return [
            p
            for p in self._points.get(box_id, ())
            if p.at >= since and (end is None or p.at <= end)
        ]
