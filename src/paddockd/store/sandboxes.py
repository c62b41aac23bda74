"""What an E2B client gave when it created a sandbox (template, metadata, env vars), one row
per box. The box itself stays Paddock's own record; this is only what E2B adds to it. The
row goes with the box's, in one transaction (BoxRepository's `dependents`, wired in
wiring.py), however the box is deleted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.header_rules import HeaderRule, dump_rules, parse_rules
from .db import Database, boxes, sandboxes


@dataclass(frozen=True)
class SandboxExtras:
    box_id: str
    template: str = "base"
    metadata: dict[str, str] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    # E2B's allowPublicTraffic and autoResume: who reaches its ports, and whether that
    # wakes it (services/e2b/hosts.py).
    public_traffic: bool = True
    auto_resume: bool = False
    # E2B's network.rules: headers the credential gateway sets per host.
    network_rules: tuple[HeaderRule, ...] = ()


def _load(text: object) -> dict[str, str]:
    data = json.loads(str(text)) if text else {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _extras(r: sa.Row[Any]) -> SandboxExtras:
    return SandboxExtras(
        str(r.box_id),
        str(r.template),
        _load(r.metadata),
        _load(r.env_vars),
        bool(r.public_traffic),
        bool(r.auto_resume),
        parse_rules(json.loads(str(r.network_rules or "{}"))),
    )


class SandboxRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, extras: SandboxExtras) -> None:
        """Keep the box's extras, only while the box exists: one statement, so a box deleted
        just after it was made (a TTL of seconds, a kill from elsewhere) leaves no row."""
        row = sa.select(
            sa.literal(extras.box_id),
            sa.literal(extras.template),
            sa.literal(json.dumps(extras.metadata)),
            sa.literal(json.dumps(extras.env_vars)),
            sa.literal(extras.public_traffic),
            sa.literal(extras.auto_resume),
            sa.literal(json.dumps(dump_rules(extras.network_rules))),
        ).where(sa.exists().where(boxes.c.id == extras.box_id))

        def work(conn: Connection) -> None:
            conn.execute(sandboxes.delete().where(sandboxes.c.box_id == extras.box_id))
            columns = ["box_id", "template", "metadata", "env_vars"]
            columns += ["public_traffic", "auto_resume", "network_rules"]
            conn.execute(sandboxes.insert().from_select(columns, row))

        await self._db.run(work)

    async def all(self) -> dict[str, SandboxExtras]:
        def work(conn: Connection) -> dict[str, SandboxExtras]:
            return {str(r.box_id): _extras(r) for r in conn.execute(sa.select(sandboxes))}

        return await self._db.run(work)

    async def ids(self) -> set[str]:
        """The boxes that are E2B sandboxes."""

        def work(conn: Connection) -> set[str]:
            return {str(r[0]) for r in conn.execute(sa.select(sandboxes.c.box_id))}

        return await self._db.run(work)

    async def get(self, box_id: str) -> SandboxExtras:
        """The box's extras; a box made outside E2B has none (the defaults)."""
        return await self.find(box_id) or SandboxExtras(box_id)

    async def find(self, box_id: str) -> SandboxExtras | None:
        """The box's extras, None for a box made outside E2B."""

        def work(conn: Connection) -> SandboxExtras | None:
            r = conn.execute(sa.select(sandboxes).where(sandboxes.c.box_id == box_id)).first()
            return None if r is None else _extras(r)

        return await self._db.run(work)

    async def delete(self, box_id: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(sandboxes.delete().where(sandboxes.c.box_id == box_id))

        await self._db.run(work)

    async def set_rules(self, box_id: str, rules: tuple[HeaderRule, ...]) -> None:
        """E2B's update_network: the sandbox's header rules replaced as a whole."""
        text = json.dumps(dump_rules(rules))

        def work(conn: Connection) -> None:
            this = sandboxes.c.box_id == box_id
            conn.execute(sandboxes.update().where(this).values(network_rules=text))

        await self._db.run(work)
