"""Per-client quotas for the listeners a box can reach (the DNS filter): a token bucket per
client for rates, and counted slots per client under a total for concurrency. Keyed by the
client's address, which the bridge guard makes a box's own. Used from the event loop only."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable


class TokenBuckets:
    """`rate` tokens a second per client, up to `burst`; each use takes one."""

    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 4096,
    ) -> None:
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._max_clients = max_clients
        self._state: dict[str, tuple[float, float]] = {}  # client -> (tokens, when)

    def take(self, client: str) -> bool:
        now = self._clock()
        tokens = self._tokens(client, now)
        allowed = tokens >= 1
        self._state[client] = (tokens - 1 if allowed else tokens, now)
        if len(self._state) > self._max_clients:
            self._forget_full(now)
        return allowed

    def _tokens(self, client: str, now: float) -> float:
        tokens, when = self._state.get(client, (self._burst, now))
        return min(self._burst, tokens + (now - when) * self._rate)

    def _forget_full(self, now: float) -> None:
        # A full bucket says nothing a missing one does not: the table stays as small as
        # the set of clients that were busy lately.
        self._state = {c: s for c, s in self._state.items() if self._tokens(c, now) < self._burst}


class Slots:
    """Things in progress (connections, queries): at most `per_client` for one client and
    `total` for all of them together."""

    def __init__(self, per_client: int, total: int) -> None:
        self._per_client = per_client
        self._total = total
        self._held: Counter[str] = Counter()

    def acquire(self, client: str) -> bool:
        if self._held[client] >= self._per_client or self._held.total() >= self._total:
            return False
        self._held[client] += 1
        return True

    def release(self, client: str) -> None:
        self._held[client] -= 1
        if self._held[client] <= 0:
            del self._held[client]

    def held(self, client: str | None = None) -> int:
        return self._held.total() if client is None else self._held[client]
