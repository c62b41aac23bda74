"""Box and snapshot rows <-> domain objects."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..domain.box import Box, BoxState, Desired, TtlAction, looks_like_id
from ..domain.errors import Conflict
from ..domain.network import NetworkPolicy
from ..domain.snapshot import Snapshot
from .db import Database, boxes, snapshots

_TIMES = ("created_at", "started_at", "expires_at")
T = TypeVar("T")
Rows = dict[str, "Box"]


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, timezone.utc) if value is not None else None


def _to_row(box: Box) -> dict[str, Any]:
    row = asdict(box)
    row["drives"] = json.dumps(list(box.drives))
    row["env"] = json.dumps([list(pair) for pair in box.env])
    row["network"] = box.network.to_json()
    row["state"] = box.state.value
    row["desired"] = box.desired.value
    row["ttl_action"] = box.ttl_action.value
    for key in _TIMES:
        row[key] = _ts(row[key])
    return row


def _from_row(row: sa.Row[Any]) -> Box:
    return _from_values(dict(row._mapping))


def _from_values(data: dict[str, Any]) -> Box:
    for key in _TIMES:
        data[key] = _dt(data[key])
    data["state"] = BoxState(data["state"])
    data["desired"] = Desired(data["desired"])
    data["ttl_action"] = TtlAction(data["ttl_action"])
    data["drives"] = tuple(json.loads(data.get("drives") or "[]"))
    data["env"] = tuple((str(k), str(v)) for k, v in json.loads(data.get("env") or "[]"))
    data["network"] = NetworkPolicy.from_json(data.get("network"))
    return Box(**data)


def _as_read(box: Box) -> Box:
    """`box` as a read of its row would give it (times to the row's precision)."""
    return _from_values(_to_row(box))


class StoreWatcher(Protocol):
    """Told of writes as they are done (synchronously: it must not block)."""

    def added(self, box: Box) -> None: ...
    def moved(self, before: Box, after: Box) -> None: ...
    def removed(self, box_id: str) -> None: ...
    def snapshot_added(self, snap: Snapshot) -> None: ...


class BoxRepository:
    def __init__(
        self,
        db: Database,
        changed: Callable[[str], None] | None = None,
        dependents: Sequence[sa.Column[Any]] = (),
    ) -> None:
        """`changed(box_id)` is told of every write to a box or its snapshots, once done
        (the dashboard's live list: services/events.py). `dependents` are box-id columns
        of other tables (E2B's sandbox rows) whose rows go in the same transaction as the
        box's, whoever deletes it (API, reaper, reconciler), so none outlives its box."""
        self._db = db
        self._changed = changed or (lambda box_id: None)
        self._dependents = tuple(dependents)
        # Told of each box made, each change of its state, each removal and each snapshot,
        # once written, in the order written (the events: services/box_events.py).
        self.watcher: StoreWatcher | None = None
        # Every box's row as last written, read once and then kept by this repository's
        # own writes (paddockd is the table's one writer, through here): a box at rest
        # costs the periodic passes no database read. Replaced whole at each write, under
        # `_writing` and after the commit, so a reader takes a consistent view unlocked.
        self._rows: Rows | None = None
        self._writing = threading.Lock()

    async def _write(self, work: Callable[[Connection], T], keep: Callable[[Rows], None]) -> T:
        """`work` in a transaction; once committed, `keep` brings a copy of the rows up to
        date, in the same turn (writes land in the rows in the order they commit)."""

        def run() -> T:
            with self._writing:
                done = self._db.run_here(work)
                if self._rows is not None:
                    rows = dict(self._rows)
                    keep(rows)
                    self._rows = rows
                return done

        return await anyio.to_thread.run_sync(run)

    async def _all_rows(self) -> Rows:
        rows = self._rows
        if rows is not None:
            return rows

        def load() -> Rows:
            with self._writing:
                if self._rows is None:
                    found = self._db.run_here(
                        lambda conn: conn.execute(
                            sa.select(boxes).order_by(boxes.c.created_at)
                        ).all()
                    )
                    self._rows = {r.id: _from_row(r) for r in found}
                return self._rows

        return await anyio.to_thread.run_sync(load)

    async def add(self, box: Box) -> None:
        def work(conn: Connection) -> None:
            taken = conn.execute(sa.select(boxes.c.id).where(boxes.c.name == box.name)).first()
            if taken:
                raise Conflict(f"a box named {box.name!r} already exists")
            conn.execute(boxes.insert().values(**_to_row(box)))

        def keep(rows: Rows) -> None:
            rows[box.id] = _as_read(box)

        await self._write(work, keep)
        self._changed(box.id)
        if self.watcher is not None:
            self.watcher.added(box)

    async def update(self, box: Box, **changes: Any) -> Box:
        """Write only the given fields, so concurrent writers of different fields of one box
        (the reconciler's state, an API's desired state or policy) never undo each other."""
        updated = replace(box, **changes)
        row = _to_row(updated)
        values = {key: row[key] for key in changes}

        def keep(rows: Rows) -> None:
            # Only the fields written: another writer's fields stay as that one left them.
            if (kept := rows.get(box.id)) is not None:
                rows[box.id] = _as_read(replace(kept, **changes))

        written = await self._write(
            lambda conn: (
                conn.execute(boxes.update().where(boxes.c.id == box.id).values(**values)).rowcount
            ),
            keep,
        )
        # The reconciler rewrites what it finds on every pass: only a change is news.
        if any(getattr(box, key) != value for key, value in changes.items()):
            self._changed(box.id)
            # (A warm pool's box has no row until it is claimed: it is no one's news yet.)
            if self.watcher is not None and updated.state != box.state and written:
                self.watcher.moved(box, updated)
        return updated

    async def get(self, box_id: str) -> Box | None:
        return (await self._all_rows()).get(box_id)

    async def find(self, ref: str) -> list[Box]:
        """The box with this id, else the one with this name, else the boxes whose id
        starts with it (several: the caller reports the ambiguity)."""
        rows = await self._all_rows()
        # An id first: no name, however chosen, can take another box's id from it.
        if ref in rows:
            return [rows[ref]]
        named = [b for b in rows.values() if b.name == ref]
        if named or not looks_like_id(ref):
            return named
        return sorted((b for b in rows.values() if b.id.startswith(ref)), key=lambda b: b.id)

    async def all(self) -> list[Box]:
        return sorted((await self._all_rows()).values(), key=lambda b: b.created_at)

    async def delete(self, box_id: str) -> None:
        def work(conn: Connection) -> None:
            for column in self._dependents:
                conn.execute(column.table.delete().where(column == box_id))
            conn.execute(snapshots.delete().where(snapshots.c.box_id == box_id))
            conn.execute(boxes.delete().where(boxes.c.id == box_id))

        def keep(rows: Rows) -> None:
            rows.pop(box_id, None)

        await self._write(work, keep)
        self._changed(box_id)
        if self.watcher is not None:
            self.watcher.removed(box_id)

    async def add_snapshot(self, snap: Snapshot, current: bool = False) -> None:
        """`current`: it is what the box's container is (re)made from, in the same write."""
        row = {
            "box_id": snap.box_id,
            "seq": snap.seq,
            "image": snap.image,
            "label": snap.label,
            "kind": snap.kind,
            "created_at": snap.created_at.timestamp(),
            "size": snap.size,
            "disk": snap.disk,
        }

        def work(conn: Connection) -> None:
            conn.execute(snapshots.insert().values(**row))
            if current:
                conn.execute(
                    boxes.update()
                    .where(boxes.c.id == snap.box_id)
                    .values(current_snapshot=snap.image, current_disk=snap.disk)
                )

        def keep(rows: Rows) -> None:
            if current and (kept := rows.get(snap.box_id)) is not None:
                image, disk = snap.image, snap.disk
                rows[snap.box_id] = replace(kept, current_snapshot=image, current_disk=disk)

        await self._write(work, keep)
        self._changed(snap.box_id)
        if self.watcher is not None:
            self.watcher.snapshot_added(snap)

    async def snapshots(self, box_id: str) -> list[Snapshot]:
        """A box's snapshots, newest first."""
        rows = await self._db.run(
            lambda conn: conn.execute(
                sa.select(snapshots)
                .where(snapshots.c.box_id == box_id)
                .order_by(snapshots.c.seq.desc())
            ).all()
        )
        return [
            Snapshot(
                box_id=r.box_id,
                seq=r.seq,
                image=r.image,
                kind=r.kind,
                label=r.label,
                created_at=_dt(r.created_at) or datetime.now(timezone.utc),
                size=r.size,
                disk=r.disk,
            )
            for r in rows
        ]

    async def snapshot_counts(self) -> dict[str, int]:
        rows = await self._db.run(
            lambda conn: conn.execute(
                sa.select(snapshots.c.box_id, sa.func.count()).group_by(snapshots.c.box_id)
            ).all()
        )
        return {str(box_id): int(count) for box_id, count in rows}

    async def snapshot_images(self, box_id: str) -> list[str]:
        return [s.image for s in await self.snapshots(box_id)]

    async def delete_snapshot(self, box_id: str, seq: int) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                snapshots.delete().where(snapshots.c.box_id == box_id, snapshots.c.seq == seq)
            )
        )
        self._changed(box_id)

    async def next_snapshot_seq(self, box_id: str) -> int:
        seq = await self._db.run(
            lambda conn: conn.execute(
                sa.select(sa.func.coalesce(sa.func.max(snapshots.c.seq), 0)).where(
                    snapshots.c.box_id == box_id
                )
            ).scalar_one()
        )
        return int(seq) + 1

    async def all_snapshot_disks(self) -> set[str]:
        rows = await self._db.run(
            lambda conn: conn.execute(
                sa.select(snapshots.c.disk).where(snapshots.c.disk.is_not(None))
            ).all()
        )
        return {row[0] for row in rows}

    async def all_snapshot_images(self) -> set[str]:
        rows = await self._db.run(lambda conn: conn.execute(sa.select(snapshots.c.image)).all())
        return {row[0] for row in rows}

    async def images_in_use(self, except_box: str | None = None) -> set[str]:
        """Images some box is, or would be, created from (so they must stay). A box being
        deleted will be created from nothing again (its container, gone or going, is
        counted by the engine's listing: Reconciler.images_needed)."""

        def work(conn: Connection) -> list[sa.Row[Any]]:
            rows = conn.execute(
                sa.select(boxes.c.image, boxes.c.current_snapshot).where(
                    boxes.c.id != (except_box or ""),
                    boxes.c.state != BoxState.DELETING.value,
                )
            ).all()
            # A copy of a disk is made into a container of its base image.
            bases = conn.execute(
                sa.select(snapshots.c.image).where(
                    snapshots.c.disk.is_not(None), snapshots.c.box_id != (except_box or "")
                )
            ).all()
            return [*rows, *bases]

        return {img for row in await self._db.run(work) for img in row if img}
