"""Webhooks (their secret sealed, as provider keys are) and their deliveries: queued per
event, taken in order, kept as a log of the last ones per webhook."""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.webhooks import Event, Webhook
from .credentials import Sealer
from .db import Database, webhook_deliveries, webhooks

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
KEEP_DELIVERIES = 200  # per webhook: the log of the last ones


@dataclass(frozen=True)
class Delivery:
    id: int
    webhook_id: str
    event_id: str
    event_type: str
    box_id: str
    body: bytes
    created_at: float
    state: str
    attempts: int
    next_at: float
    status: int | None = None
    error: str | None = None


def _webhook(r: sa.Row[tuple[object, ...]]) -> Webhook:
    events = json.loads(str(r.events))
    return Webhook(
        str(r.id),
        str(r.owner_id) if r.owner_id is not None else None,
        str(r.url),
        tuple(str(e) for e in events),
        float(str(r.created_at)),
    )


def _delivery(r: sa.Row[tuple[object, ...]]) -> Delivery:
    m = r._mapping
    return Delivery(**{c.name: m[c.name] for c in webhook_deliveries.columns})


class WebhookRepository:
    def __init__(self, db: Database, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    async def add(self, hook: Webhook, secret: str) -> None:
        row = {
            "id": hook.id,
            "owner_id": hook.owner_id,
            "url": hook.url,
            "events": json.dumps(list(hook.events)),
            "secret": self._sealer.seal(secret),
            "created_at": hook.created_at,
        }
        await self._db.run(lambda conn: conn.execute(webhooks.insert().values(**row)))

    async def all(self) -> list[Webhook]:
        def work(conn: Connection) -> list[Webhook]:
            rows = conn.execute(sa.select(webhooks).order_by(webhooks.c.created_at))
            return [_webhook(r) for r in rows]

        return await self._db.run(work)

    async def secret(self, hook_id: str) -> str | None:
        def work(conn: Connection) -> bytes | None:
            found = conn.execute(sa.select(webhooks.c.secret).where(webhooks.c.id == hook_id))
            return found.scalar()

        sealed = await self._db.run(work)
        return self._sealer.open(sealed) if sealed is not None else None

    async def remove(self, hook_id: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(webhooks.delete().where(webhooks.c.id == hook_id))
            d = webhook_deliveries
            conn.execute(d.delete().where(d.c.webhook_id == hook_id))

        await self._db.run(work)

    async def remove_owner(self, owner_id: str) -> int:
        """A removed member's webhooks go with them; how many."""
        gone = [h.id for h in await self.all() if h.owner_id == owner_id]
        for hook_id in gone:
            await self.remove(hook_id)
        return len(gone)

    # -- deliveries ---------------------------------------------------------------------
    async def queue(
        self, hooks: list[Webhook], event: Event, now: float, due: float | None = None
    ) -> list[Delivery]:
        """A delivery of `event` to each webhook, due at `due` (now); the rows made."""
        rows = [
            {
                "webhook_id": h.id,
                "event_id": event.id,
                "event_type": event.type,
                "box_id": event.box_id,
                "body": event.body(),
                "created_at": now,
                "state": PENDING,
                "attempts": 0,
                "next_at": now if due is None else due,
            }
            for h in hooks
        ]

        def work(conn: Connection) -> list[Delivery]:
            made = []
            for row in rows:
                done = conn.execute(webhook_deliveries.insert().values(**row))
                key = done.inserted_primary_key
                assert key is not None
                made.append(Delivery(id=int(key[0]), **row))  # type: ignore[arg-type]
            return made

        return await self._db.run(work) if rows else []

    async def due(self, now: float, limit: int, per_webhook: int) -> list[Delivery]:
        """The pending deliveries to try now: per webhook and box only the oldest pending
        one (a box's events arrive in order; a later one waits while an earlier retries),
        and at most `per_webhook` of each webhook's, oldest first."""
        d = webhook_deliveries

        def work(conn: Connection) -> list[Delivery]:
            first = (
                sa.select(sa.func.min(d.c.id))
                .where(d.c.state == PENDING)
                .group_by(d.c.webhook_id, d.c.box_id)
            )
            heads = (
                sa.select(
                    d.c.id,
                    sa.func.row_number()
                    .over(partition_by=d.c.webhook_id, order_by=d.c.id)
                    .label("place"),
                )
                .where(d.c.id.in_(first), d.c.next_at <= now)
                .subquery()
            )
            rows = conn.execute(
                sa.select(d)
                .join(heads, heads.c.id == d.c.id)
                .where(heads.c.place <= per_webhook)
                .order_by(d.c.id)
                .limit(limit)
            )
            return [_delivery(r) for r in rows]

        return await self._db.run(work)

    async def pending(self) -> dict[str, int]:
        """How many deliveries wait, per webhook."""
        d = webhook_deliveries

        def work(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                sa.select(d.c.webhook_id, sa.func.count())
                .where(d.c.state == PENDING)
                .group_by(d.c.webhook_id)
            )
            return {str(hook): int(n) for hook, n in rows}

        return await self._db.run(work)

    async def next_due(self, besides: set[int] | None = None) -> float | None:
        """When the next pending delivery (not one of `besides`, being tried) is due."""
        d = webhook_deliveries

        def work(conn: Connection) -> float | None:
            # Only the heads of each webhook's box queue: a later one waits for its head.
            heads = (
                sa.select(sa.func.min(d.c.id))
                .where(d.c.state == PENDING)
                .group_by(d.c.webhook_id, d.c.box_id)
            )
            where = [d.c.id.in_(heads)]
            if besides:
                where.append(d.c.id.not_in(besides))
            found = conn.execute(sa.select(sa.func.min(d.c.next_at)).where(*where))
            value = found.scalar()
            return float(value) if value is not None else None

        return await self._db.run(work)

    async def record(self, delivery: Delivery) -> None:
        d = webhook_deliveries
        values = {
            "state": delivery.state,
            "attempts": delivery.attempts,
            "next_at": delivery.next_at,
            "status": delivery.status,
            "error": delivery.error,
        }

        def work(conn: Connection) -> None:
            conn.execute(d.update().where(d.c.id == delivery.id).values(**values))

        await self._db.run(work)

    async def log(self, hook_id: str, limit: int) -> list[Delivery]:
        d = webhook_deliveries

        def work(conn: Connection) -> list[Delivery]:
            rows = conn.execute(
                sa.select(d).where(d.c.webhook_id == hook_id).order_by(d.c.id.desc()).limit(limit)
            )
            return [_delivery(r) for r in rows]

        return await self._db.run(work)

    async def trim(self) -> int:
        """Keep the last KEEP_DELIVERIES finished deliveries of each webhook."""
        d = webhook_deliveries

        def work(conn: Connection) -> int:
            gone = 0
            for (hook_id,) in conn.execute(sa.select(d.c.webhook_id).distinct()):
                keep = (
                    sa.select(d.c.id)
                    .where(d.c.webhook_id == hook_id)
                    .order_by(d.c.id.desc())
                    .limit(KEEP_DELIVERIES)
                )
                done = conn.execute(
                    d.delete().where(
                        d.c.webhook_id == hook_id, d.c.state != PENDING, d.c.id.not_in(keep)
                    )
                )
                gone += done.rowcount or 0
            return gone

        return await self._db.run(work)
