"""When each box was last used, and what keeps it busy now: the idle stop reads this.

Use is what a person or agent does through paddockd: an exec, a file transfer, an open
terminal or desktop viewer, an agent run, preview traffic. What a box does on its own (a
build left running in the background) is not use: a box with no one attached for its
idle time stops, as a TTL stop does (its files kept in a snapshot)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Activity:
    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._seen: dict[str, float] = {}
        self._open: Counter[str] = Counter()

    def touch(self, box_id: str) -> None:
        self._seen[box_id] = self._now()

    @contextmanager
    def busy(self, box_id: str) -> Iterator[None]:
        """Held while a session is open (an exec, a terminal, a viewer, a run)."""
        self._open[box_id] += 1
        self.touch(box_id)
        try:
            yield
        finally:
            self._open[box_id] -= 1
            if self._open[box_id] <= 0:
                del self._open[box_id]
            self.touch(box_id)

    def idle_for(self, box_id: str) -> float:
        """Seconds since the box was last used (0 while a session is open). A box not seen
        since paddockd started counts from the first time it is asked about."""
        if self._open.get(box_id):
            return 0.0
        now = self._now()
        return now - self._seen.setdefault(box_id, now)

    def forget(self, box_id: str) -> None:
        self._seen.pop(box_id, None)
        self._open.pop(box_id, None)
