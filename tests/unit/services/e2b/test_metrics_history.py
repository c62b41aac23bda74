"""E2B's get_metrics(start, end) from the usage history (services/usage_history.py): a
reading every few seconds of E2B's sandboxes only, CPU % between two readings of one
container, the window asked for, and the history gone with the sandbox."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ...conftest import World

pytestmark = pytest.mark.anyio


async def test_metrics_over_a_time_range(world: World) -> None:
    e2b = world.services.e2b
    history = e2b.history
    assert history is not None
    caller = await e2b.authenticate(world.token)
    s = await e2b.create(caller, "base", 600, {}, {}, None, None)
    plain = await world.boxes.create("plain", "small", 600, "stop")
    start = world.clock.now
    for _ in range(4):
        await history.sample()
        world.clock.advance(5)
    # The first reading of a container gives no CPU % yet: three points.
    points = history.points(s.box.id)
    assert len(points) == 3
    assert {p.cpu_percent for p in points} == {50.0}
    # Only E2B's sandboxes are read: a box made otherwise costs nothing here.
    assert history.points(plain.id) == []
    assert plain.container_id not in world.runtime.readings

    every = await e2b.metrics(caller, s.box.id)
    assert len(every) == 3
    assert every[0]["cpuUsedPct"] == 50.0 / s.box.cpus
    assert every[0]["memUsed"] == 100 << 20
    window = await e2b.metrics(
        caller, s.box.id, start + timedelta(seconds=6), start + timedelta(seconds=11)
    )
    assert [m["timestampUnix"] for m in window] == [
        int((start + timedelta(seconds=10)).timestamp())
    ]

    # Deleted: its history goes at the next reading.
    await e2b.kill(caller, s.box.id)
    await world.reconciler.drain()
    await history.sample()
    assert history.points(s.box.id) == []


async def test_without_history_one_reading_of_now(world: World) -> None:
    e2b = world.services.e2b
    caller = await e2b.authenticate(world.token)
    s = await e2b.create(caller, "base", 600, {}, {}, None, None)
    now = await e2b.metrics(caller, s.box.id)
    assert len(now) == 1 and now[0]["timestampUnix"] == int(world.clock.now.timestamp())
    past = world.clock.now - timedelta(hours=2)
    assert await e2b.metrics(caller, s.box.id, past, past + timedelta(minutes=1)) == []
