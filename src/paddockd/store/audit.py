"""The audit log's rows: appended in batches, read newest first, trimmed by age and count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.audit import AuditEntry
from .db import Database, audit_log


@dataclass(frozen=True)
class AuditQuery:
    """Which entries: `user_id` one user's (None: anyone's), `actor` by name, `target`
    naming this (a box's name or id), `since`/`until` as Unix times, newest first."""

    user_id: str | None = None
    actor: str | None = None
    target: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 100


class AuditRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(self, entries: Sequence[AuditEntry]) -> None:
        if entries:
            rows = [asdict(e) for e in entries]
            await self._db.run(lambda conn: conn.execute(audit_log.insert(), rows))

    async def find(self, query: AuditQuery) -> list[AuditEntry]:
        t = audit_log.c
        where = []
        if query.user_id is not None:
            where.append(t.user_id == query.user_id)
        if query.actor is not None:
            where.append(t.actor == query.actor)
        if query.target is not None:
            # A target is `name=value` pairs, ", "-separated: a value, whole.
            value = _escaped(query.target)
            where.append(
                sa.or_(
                    t.target.like(f"%={value}", escape="\\"),
                    t.target.like(f"%={value}, %", escape="\\"),
                )
            )
        if query.since is not None:
            where.append(t.at >= query.since)
        if query.until is not None:
            where.append(t.at < query.until)
        select = (
            sa.select(
                t.at, t.actor, t.user_id, t.credential, t.source, t.action, t.target, t.status
            )
            .where(*where)
            .order_by(t.id.desc())
            .limit(query.limit)
        )
        rows = await self._db.run(lambda conn: conn.execute(select).all())
        return [AuditEntry(*row) for row in rows]

    async def trim(self, before: float, keep: int) -> int:
        """Drop entries older than `before`, and the oldest past the newest `keep`."""

        def work(conn: Connection) -> int:
            gone = conn.execute(audit_log.delete().where(audit_log.c.at < before)).rowcount
            cut = conn.execute(
                sa.select(audit_log.c.id).order_by(audit_log.c.id.desc()).offset(keep).limit(1)
            ).scalar()
            if cut is not None:
                gone += conn.execute(audit_log.delete().where(audit_log.c.id <= cut)).rowcount
            return int(gone)

        return await self._db.run(work)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
