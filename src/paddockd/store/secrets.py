"""The user's own secrets (encrypted at rest, as provider keys are), the boxes each is
attached to, the placeholders boxes hold in their place, and the log of their uses
through the credential gateway."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.credentials import PlaceholderKind, new_placeholder
from ..domain.secrets import SecretRule
from .credentials import Sealer, whose
from .db import (
    Database,
    box_credentials,
    box_secrets,
    boxes,
    credential_uses,
    credentials,
    placeholders,
    secrets,
)

# The most use lines kept per holder; the oldest go first.
MAX_USES = 5000


@dataclass(frozen=True)
class StoredSecret:
    rule: SecretRule
    created_at: float
    last_used_at: float | None


@dataclass(frozen=True)
class Placeholder:
    value: str
    box_id: str
    kind: PlaceholderKind
    name: str


@dataclass(frozen=True)
class Facts:
    box_name: str
    owner_id: str | None
    found: list[Placeholder]
    attached: frozenset[str]  # providers whose keys are attached to the box


@dataclass(frozen=True)
class Use:
    box_id: str
    box_name: str
    kind: PlaceholderKind
    name: str
    host: str
    method: str
    path: str
    status: int
    outcome: str  # used | refused
    reason: str | None
    at: float


def _rule(row: Sequence[Any]) -> SecretRule:
    name, hosts, header, fmt = row
    return SecretRule(str(name), tuple(json.loads(hosts)), header, fmt)


class SecretRepository:
    def __init__(self, db: Database, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer

    # -- secrets ------------------------------------------------------------------------
    async def put(self, holder: str | None, rule: SecretRule, value: str | None) -> bool:
        """Store or change a secret (None: keep its value); whether it is new."""

        def work(conn: Connection) -> bool:
            mine = whose(secrets.c.user_id, holder) & (secrets.c.name == rule.name)
            fields = {
                "hosts": json.dumps(list(rule.hosts)),
                "header": rule.header,
                "format": rule.format,
            }
            if value is not None:
                fields["value"] = self._sealer.seal(value)  # type: ignore[assignment]
            if conn.execute(sa.select(secrets.c.name).where(mine)).first() is not None:
                conn.execute(secrets.update().where(mine).values(**fields))
                return False
            conn.execute(
                secrets.insert().values(
                    user_id=holder or "", name=rule.name, created_at=time.time(), **fields
                )
            )
            return True

        return await self._db.run(work)

    async def all(self, holder: str | None) -> list[StoredSecret]:
        def work(conn: Connection) -> list[StoredSecret]:
            rows = conn.execute(
                sa.select(
                    secrets.c.name,
                    secrets.c.hosts,
                    secrets.c.header,
                    secrets.c.format,
                    secrets.c.created_at,
                    secrets.c.last_used_at,
                )
                .where(whose(secrets.c.user_id, holder))
                .order_by(secrets.c.name)
            ).all()
            return [StoredSecret(_rule(r[:4]), r[4], r[5]) for r in rows]

        return await self._db.run(work)

    async def delete(self, holder: str | None, box_ids: list[str], name: str | None) -> int:
        """Forget the holder's secret `name` (None: all of theirs), detached from their
        boxes `box_ids`; how many went."""

        def work(conn: Connection) -> int:
            mine: list[sa.ColumnElement[bool]] = [whose(secrets.c.user_id, holder)]
            attached: list[sa.ColumnElement[bool]] = [box_secrets.c.box_id.in_(box_ids)]
            if name is not None:
                mine.append(secrets.c.name == name)
                attached.append(box_secrets.c.name == name)
            conn.execute(box_secrets.delete().where(*attached))
            return int(conn.execute(secrets.delete().where(*mine)).rowcount)

        return await self._db.run(work)

    async def values(self, holder: str | None, names: list[str]) -> dict[str, str]:
        """name -> the real value, for the holder's secrets among `names` (their use is
        marked with the use's line: `record`)."""

        def work(conn: Connection) -> dict[str, str]:
            wanted = whose(secrets.c.user_id, holder) & secrets.c.name.in_(names)
            rows = conn.execute(sa.select(secrets.c.name, secrets.c.value).where(wanted)).all()
            return {r[0]: self._sealer.open(r[1]) for r in rows}

        return await self._db.run(work)

    # -- attachments --------------------------------------------------------------------
    async def attach(self, box_id: str, name: str) -> None:
        def work(conn: Connection) -> None:
            this = (box_secrets.c.box_id == box_id) & (box_secrets.c.name == name)
            conn.execute(box_secrets.delete().where(this))
            conn.execute(box_secrets.insert().values(box_id=box_id, name=name))

        await self._db.run(work)

    async def detach(self, box_id: str, name: str) -> None:
        def work(conn: Connection) -> None:
            this = (box_secrets.c.box_id == box_id) & (box_secrets.c.name == name)
            conn.execute(box_secrets.delete().where(this))

        await self._db.run(work)

    async def attachments(self) -> dict[str, list[str]]:
        """box id -> the names of the secrets attached to it (every box's)."""

        def work(conn: Connection) -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            for box_id, name in conn.execute(sa.select(box_secrets.c.box_id, box_secrets.c.name)):
                found.setdefault(box_id, []).append(name)
            return {k: sorted(v) for k, v in found.items()}

        return await self._db.run(work)

    async def rules(self) -> dict[tuple[str, str], SecretRule]:
        """(holder, name) -> how it is used, for every secret (values stay sealed)."""

        def work(conn: Connection) -> dict[tuple[str, str], SecretRule]:
            rows = conn.execute(
                sa.select(
                    secrets.c.user_id,
                    secrets.c.name,
                    secrets.c.hosts,
                    secrets.c.header,
                    secrets.c.format,
                )
            ).all()
            return {(r[0], r[1]): _rule(r[1:]) for r in rows}

        return await self._db.run(work)

    # -- what the gateway needs to know of a request, in one read ----------------------
    async def facts(self, box_id: str, values: list[str]) -> Facts | None:
        """The box's name and owner, the rows of these placeholders, and the providers
        attached to the box; None for no such box."""

        def work(conn: Connection) -> Facts | None:
            box = conn.execute(
                sa.select(boxes.c.name, boxes.c.owner_id).where(boxes.c.id == box_id)
            ).first()
            if box is None:
                return None
            attached = conn.execute(
                sa.select(box_credentials.c.provider).where(box_credentials.c.box_id == box_id)
            ).all()
            return Facts(
                str(box[0]),
                box[1],
                _placeholders(conn, values),
                frozenset(str(a[0]) for a in attached),
            )

        return await self._db.run(work)

    # -- placeholders -------------------------------------------------------------------
    async def placeholder(self, box_id: str, kind: PlaceholderKind, name: str) -> str:
        """The box's placeholder for this key or secret, made on first use."""

        def work(conn: Connection) -> str:
            mine = (
                (placeholders.c.box_id == box_id)
                & (placeholders.c.kind == kind)
                & (placeholders.c.name == name)
            )
            found = conn.execute(sa.select(placeholders.c.value).where(mine)).first()
            if found is not None:
                return str(found[0])
            value = new_placeholder(kind)
            conn.execute(
                placeholders.insert().values(
                    value=value, box_id=box_id, kind=kind, name=name, created_at=time.time()
                )
            )
            return value

        return await self._db.run(work)

    async def placeholders(self, values: list[str]) -> list[Placeholder]:
        return await self._db.run(lambda conn: _placeholders(conn, values))

    # -- uses ---------------------------------------------------------------------------
    async def record(self, uses: list[tuple[str | None, Use]]) -> None:
        """Write these (holder, use) lines; each holder keeps its newest MAX_USES uses and,
        apart, its newest MAX_USES refusals (refusals never push uses out)."""

        def work(conn: Connection) -> None:
            conn.execute(
                credential_uses.insert(),
                [{"user_id": holder or "", **use.__dict__} for holder, use in uses],
            )
            used = {(h or "", u.kind, u.name) for h, u in uses if u.outcome == "used"}
            last = max(u.at for _, u in uses)
            for user, kind, name in used:
                table, column = (
                    (credentials, credentials.c.provider)
                    if kind == "provider"
                    else (
                        secrets,
                        secrets.c.name,
                    )
                )
                conn.execute(
                    table.update()
                    .where((table.c.user_id == user) & (column == name))
                    .values(last_used_at=last)
                )
            for holder, outcome in {(h, u.outcome) for h, u in uses}:
                mine = whose(credential_uses.c.user_id, holder) & (
                    credential_uses.c.outcome == outcome
                )
                cut = conn.execute(
                    sa.select(credential_uses.c.id)
                    .where(mine)
                    .order_by(credential_uses.c.id.desc())
                    .offset(MAX_USES)
                    .limit(1)
                ).first()
                if cut is not None:
                    conn.execute(
                        credential_uses.delete().where(mine & (credential_uses.c.id <= cut[0]))
                    )

        await self._db.run(work)

    async def uses(
        self,
        holder: str | None,
        kind: PlaceholderKind | None = None,
        name: str | None = None,
        box_id: str | None = None,
        limit: int = 100,
    ) -> list[Use]:
        """The newest first."""

        def work(conn: Connection) -> list[Use]:
            where = [whose(credential_uses.c.user_id, holder)]
            if kind is not None:
                where.append(credential_uses.c.kind == kind)
            if name is not None:
                where.append(credential_uses.c.name == name)
            if box_id is not None:
                where.append(credential_uses.c.box_id == box_id)
            columns = [c for c in credential_uses.c if c.name not in ("id", "user_id")]
            rows = conn.execute(
                sa.select(*columns).where(*where).order_by(credential_uses.c.id.desc()).limit(limit)
            ).all()
            return [Use(*r) for r in rows]

        return await self._db.run(work)


def _placeholders(conn: Connection, values: list[str]) -> list[Placeholder]:
    """The placeholders among `values` (whichever boxes they are of)."""
    columns = (
        placeholders.c.value,
        placeholders.c.box_id,
        placeholders.c.kind,
        placeholders.c.name,
    )
    rows = conn.execute(sa.select(*columns).where(placeholders.c.value.in_(values))).all()
    return [Placeholder(*r) for r in rows]
