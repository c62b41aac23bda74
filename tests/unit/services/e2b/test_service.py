"""E2B's sandboxes over the box services (e2b/service.py, e2b/snapshots.py), on fakes."""

from __future__ import annotations

import asyncio

import pytest

from paddockd.domain.box import BoxState, Desired
from paddockd.domain.errors import CapacityExceeded, InvalidRequest, NotFound

from ...conftest import People, World

pytestmark = pytest.mark.anyio


async def test_each_fork_succeeds_or_fails_on_its_own(world: World) -> None:
    e2b = world.services.e2b
    caller = await e2b.authenticate(world.token)
    src = await e2b.create(caller, "base", 600, {"k": "v"}, {"E": "1"}, None, None)
    # The fake server has room for three small boxes: the source and two forks.
    made = await e2b.fork(caller, src.box.id, 60, 3)
    # Made side by side: which one finds the server full is the race's.
    assert sum(isinstance(m, CapacityExceeded) for m in made) == 1
    forks = [m for m in made if not isinstance(m, Exception)]
    assert len(forks) == 2
    for f in forks:
        assert (f.extras.metadata, f.extras.env_vars) == ({"k": "v"}, {"E": "1"})
        assert f.box.expires_at is not None and f.box.ttl == 60
    # One snapshot for all of them.
    [snap] = [s for s in (await world.services.snapshots.list(src.box.id))[1]]
    assert {f.box.image for f in forks} == {snap.image}
    with pytest.raises(InvalidRequest):
        await e2b.fork(caller, src.box.id, None, 21)


async def test_a_snapshot_is_a_template_for_its_owner_only(world: World, people: People) -> None:
    e2b = world.services.e2b
    caller = await e2b.authenticate(world.token)
    src = await e2b.create(caller, "base", 600, {}, {}, None, None)
    snap = await e2b.snapshot(caller, src.box.id, "named")
    made = await e2b.create(caller, f"{src.box.id}:{snap.seq}", 600, {}, {}, None, None)
    assert made.box.image == snap.image and made.extras.template == f"{src.box.id}:{snap.seq}"
    listed, token = await e2b.snapshots.listed(caller, None, "named", 10, None)
    assert ([s.seq for s in listed], token) == ([snap.seq], None)
    bob = people.bob
    with pytest.raises(NotFound):
        await e2b.create(bob, f"{src.box.id}:{snap.seq}", 600, {}, {}, None, None)
    assert (await e2b.snapshots.listed(bob, None, None, 10, None))[0] == []
    with pytest.raises(NotFound):
        await e2b.snapshots.delete(bob, f"{src.box.id}:{snap.seq}")
    for template in ("nope", f"{src.box.id}:99", "base:1"):
        with pytest.raises(NotFound):
            await e2b.create(caller, template, 600, {}, {}, None, None)


async def test_a_connect_while_it_pauses_resumes_it_once_paused(world: World) -> None:
    e2b = world.services.e2b
    caller = await e2b.authenticate(world.token)
    made = await e2b.create(caller, "base", 600, {}, {}, None, None)
    box = await world.repo.get(made.box.id)
    assert box is not None
    # Caught mid-stop (its timeout's pause): the stop ends a moment later.
    stopping = await world.repo.update(box, state=BoxState.STOPPING, desired=Desired.STOPPED)

    async def stop_ends() -> None:
        await asyncio.sleep(0.3)
        await world.repo.update(stopping, state=BoxState.STOPPED)

    task = asyncio.create_task(stop_ends())
    again = await e2b.connect(caller, made.box.id, 600)
    await task
    assert again.box.state == BoxState.RUNNING and again.state == "running"
