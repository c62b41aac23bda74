"""The audit log: every call that changed something, and every refused one, on every
surface (recorded by api/audit_trail.py), kept in the store for `audit_days`.

Recording never waits on the database: entries gather in memory and are written a batch
a second (a crash loses at most that second). What an anonymous client can make paddockd
write is bounded: refusals are counted per source address and minute, and past a budget
only a count is logged; the table is trimmed by age and by count."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from ..domain.accounts import User
from ..domain.audit import ANONYMOUS, AuditEntry
from ..store.audit import AuditQuery, AuditRepository

log = logging.getLogger("paddockd.audit")

# Entries waiting for their batch; past this (the store stalled) the oldest go, counted.
PENDING = 10_000
# Anonymous refusals kept per source address and minute.
ANONYMOUS_PER_MINUTE = 30
MAX_ROWS = 1_000_000
MAX_LIMIT = 1000


class AuditService:
    def __init__(
        self, repo: AuditRepository, days: float, now: Callable[[], float] = time.time
    ) -> None:
        self._repo = repo
        self._days = days
        self._now = now
        self._pending: deque[AuditEntry] = deque(maxlen=PENDING)
        self._dropped = 0
        self._minute = 0
        self._anonymous: dict[str, int] = {}

    def record(self, entry: AuditEntry) -> None:
        if entry.user_id is None and not self._within_budget(entry.source):
            return
        if len(self._pending) == PENDING:
            self._dropped += 1
        self._pending.append(entry)

    def _within_budget(self, source: str) -> bool:
        minute = int(self._now() // 60)
        if minute != self._minute:
            self._minute, self._anonymous = minute, {}
        seen = self._anonymous.get(source, 0) + 1
        if len(self._anonymous) < 10_000 or source in self._anonymous:
            self._anonymous[source] = seen
        if seen == ANONYMOUS_PER_MINUTE + 1:
            log.warning("audit: more refused calls from %s this minute than are kept", source)
        return seen <= ANONYMOUS_PER_MINUTE

    async def flush(self) -> None:
        batch = list(self._pending)
        self._pending.clear()
        if self._dropped:
            log.warning("audit: %d entries dropped (the store fell behind)", self._dropped)
            self._dropped = 0
        try:
            await self._repo.append(batch)
        except Exception:
            self._pending.extendleft(reversed(batch))  # kept for the next round
            raise

    async def trim(self) -> None:
        await self._repo.trim(self._now() - self._days * 86400, MAX_ROWS)

    async def find(self, caller: User | None, query: AuditQuery) -> list[AuditEntry]:
        """Entries newest first: the owner's view holds everyone's, a member's their own."""
        await self.flush()  # what just happened is in the answer
        query = replace(query, limit=max(1, min(query.limit, MAX_LIMIT)))
        if caller is not None and not caller.is_owner:
            query = replace(query, user_id=caller.id, actor=None)
        return await self._repo.find(query)


def actor_of(user: User | None) -> tuple[str, str | None]:
    """(name, user id) an entry records for who called."""
    if user is None:
        return ANONYMOUS, None
    return user.username or "owner", user.id
