"""E2B's rows beside the boxes (e2b/store.py): they go with the box however it goes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from paddockd.domain.accounts import User
from paddockd.store.db import MIGRATIONS, sandboxes
from paddockd.store.sandboxes import SandboxExtras, SandboxRepository

from ..conftest import World

pytestmark = pytest.mark.anyio


async def _rows(world: World) -> set[str]:
    return set(await SandboxRepository(world.db).all())


async def _caller(world: World) -> User:
    return await world.services.e2b.authenticate(world.token)


async def test_a_native_delete_takes_the_row(world: World) -> None:
    e2b = world.services.e2b
    s = await e2b.create(await _caller(world), "base", 600, {"k": "v"}, {"A": "1"}, None, None)
    assert await _rows(world) == {s.box.id}
    await world.boxes.delete(s.box.id, force=True)
    await world.reconciler.drain()  # the row goes with the box's, in the background
    assert await _rows(world) == set()


async def test_the_reaper_takes_the_row(world: World) -> None:
    e2b = world.services.e2b
    caller = await _caller(world)
    gone = await e2b.create(caller, "base", 10, {"k": "v"}, {}, None, None)
    kept = await e2b.create(caller, "base", 600, {"k": "w"}, {}, None, None)
    world.clock.advance(11)
    assert await world.reaper.reap() == [gone.box.name]
    await world.reconciler.drain()
    assert await _rows(world) == {kept.box.id}
    # A paused sandbox (TTL action stop) keeps its row: it can be resumed.
    paused = await e2b.create(caller, "base", 10, {}, {}, None, None, auto_pause=True)
    world.clock.advance(11)
    await world.reaper.reap()
    await world.reconciler.drain()
    assert await _rows(world) == {kept.box.id, paused.box.id}


async def test_no_row_for_a_box_already_gone(world: World) -> None:
    repo = SandboxRepository(world.db)
    await repo.put(SandboxExtras("0" * 32, metadata={"late": "1"}))
    assert await repo.all() == {}


async def test_a_migration_removes_rows_left_by_older_versions(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    with world.db.engine.begin() as conn:
        for box_id in ("f" * 32, box.id):
            conn.execute(
                sandboxes.insert().values(
                    box_id=box_id, template="base", metadata="{}", env_vars="{}"
                )
            )
        [cleanup] = [statements for version, statements in MIGRATIONS if version == 22]
        for statement in cleanup:
            conn.execute(sa.text(statement))
    assert await _rows(world) == {box.id}
