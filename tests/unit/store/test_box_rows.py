"""The box repository keeps every row in memory after its first read and brings it up to
date on each of its own writes: what it answers must always be what a fresh read of the
database gives, however writes of different fields of one box interleave."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from paddockd.domain.box import Box, BoxState, BoxType, Desired
from paddockd.domain.errors import Conflict
from paddockd.domain.network import NetworkPolicy
from paddockd.domain.snapshot import Snapshot
from paddockd.store.boxes import BoxRepository
from paddockd.store.db import Database

SMALL = BoxType("small", 1, 1024, 1024)
T0 = datetime(2026, 12, 4, 12, 0, 0, 123456, tzinfo=timezone.utc)


def _db(tmp_path: Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'paddock.db'}")
    db.migrate()
    return db


def _box(i: int) -> Box:
    return Box.of_type(f"{i:012x}", f"box-{i}", SMALL, "paddock-box:latest", T0 + timedelta(i))


async def _fresh(db: Database) -> list[Box]:
    return await BoxRepository(db).all()


def test_rows_kept_after_each_kind_of_write_equal_a_fresh_read(tmp_path: Path) -> None:
    db = _db(tmp_path)
    repo = BoxRepository(db)

    async def scenario() -> None:
        assert await repo.all() == []  # loaded (empty) before any write
        for i in range(3):
            await repo.add(_box(i))
        with pytest.raises(Conflict):
            await repo.add(replace(_box(9), name="box-1"))
        box = await repo.get(_box(1).id)
        assert box is not None
        later = T0 + timedelta(hours=1, microseconds=7)
        await repo.update(box, state=BoxState.RUNNING, expires_at=later)
        await repo.update(box, network=NetworkPolicy("allowlist", ("example.com",)))
        snap = Snapshot(box.id, 1, "paddock-snapshots/x:1", "stop", T0, disk="x/1r0")
        await repo.add_snapshot(snap, current=True)
        await repo.delete(_box(0).id)
        assert await repo.all() == await _fresh(db)
        kept = await repo.get(box.id)
        assert kept is not None
        # Both writes of different fields stand, and the snapshot became current.
        assert kept.state == BoxState.RUNNING and kept.expires_at == later
        assert kept.network.mode == "allowlist" and kept.current_disk == "x/1r0"
        assert await repo.get(_box(0).id) is None

    asyncio.run(scenario())


def test_interleaved_writes_of_one_box_end_as_the_database_does(tmp_path: Path) -> None:
    db = _db(tmp_path)
    repo = BoxRepository(db)
    rng = random.Random(7)

    async def scenario() -> None:
        for i in range(5):
            await repo.add(_box(i))
        stale = {b.id: b for b in await repo.all()}  # writers hold old copies, as services do

        async def writer(k: int) -> None:
            for n in range(20):
                box = stale[_box(rng.randrange(5)).id]
                field = rng.choice(["state", "desired", "message", "container_id"])
                value: object = {
                    "state": rng.choice(list(BoxState)),
                    "desired": rng.choice(list(Desired)),
                    "message": f"w{k}-{n}",
                    "container_id": f"c{k}{n}",
                }[field]
                await repo.update(box, **{field: value})

        await asyncio.gather(*(writer(k) for k in range(6)))
        assert await repo.all() == await _fresh(db)

    asyncio.run(scenario())


def test_an_update_of_a_box_without_a_row_adds_none(tmp_path: Path) -> None:
    # The warm pool writes to boxes it has not claimed yet: they have no row.
    db = _db(tmp_path)
    repo = BoxRepository(db)

    async def scenario() -> None:
        await repo.all()
        await repo.update(_box(4), state=BoxState.RUNNING)
        assert await repo.get(_box(4).id) is None
        assert await _fresh(db) == []

    asyncio.run(scenario())
