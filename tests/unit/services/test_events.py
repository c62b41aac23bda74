"""The live box list (services/events.py) on fakes: each listener gets the boxes it may
see as they change, in settled batches; a member learns nothing of another user's boxes,
not even that one went away."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from paddockd.services.events import BACKLOG, BoxChanges, BoxEvent, batches

from ..conftest import People, World

pytestmark = pytest.mark.anyio


async def take(events: AsyncIterator[BoxEvent], n: int) -> list[tuple[str, str | None]]:
    """The next n events as (box id, state or None for a removal)."""
    got = []
    for _ in range(n):
        event = await asyncio.wait_for(anext(events), 5)
        got.append((event.box_id, event.box.state.value if event.box else None))
    return got


async def nothing_more(events: AsyncIterator[BoxEvent]) -> None:
    pending = asyncio.ensure_future(anext(events))
    done, _ = await asyncio.wait({pending}, timeout=0.6)
    assert not done, f"an event leaked: {pending.result() if done else None}"
    pending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pending


async def test_a_member_hears_of_their_own_boxes_only(world: World, people: People) -> None:
    events = world.services.events
    theirs = await world.boxes.create("bob-box", None, None, None, [], caller=people.bob)
    bob_list, bob_events = await events.follow(people.bob)
    owner_list, owner_events = await events.follow(people.owner)
    carol_list, carol_events = await events.follow(people.carol)
    assert [b.name for b in bob_list] == ["bob-box"] and carol_list == []
    assert [b.name for b in owner_list] == ["bob-box"]

    await world.boxes.stop(theirs.id, caller=people.bob)
    assert (await take(bob_events, 1))[-1] == (theirs.id, "stopped")
    assert (await take(owner_events, 1))[-1] == (theirs.id, "stopped")
    await world.boxes.delete(theirs.id, force=True, caller=people.bob)
    assert (await take(bob_events, 1))[-1] == (theirs.id, None)
    # Carol was never shown the box: not its changes, not its going.
    await nothing_more(carol_events)
    for stream in (bob_events, owner_events, carol_events):
        await stream.aclose()  # type: ignore[attr-defined]
    assert world.services.events._changes.listeners == 0


async def test_a_new_box_is_told_with_its_state(world: World, people: People) -> None:
    _, events = await world.services.events.follow(people.carol)
    made = await world.boxes.create("carol-box", None, None, None, [], caller=people.carol)
    got = await take(events, 1)
    assert got[0][0] == made.id and got[0][1] in ("creating", "running")
    await events.aclose()  # type: ignore[attr-defined]


async def test_a_burst_of_writes_is_one_batch_and_a_stalled_listener_is_ended() -> None:
    changes = BoxChanges()
    queue = changes.subscribe()
    for box_id in ("a", "b", "a", "a"):
        changes.changed(box_id)
    stream = batches(queue)
    assert await anext(stream) == {"a", "b"}
    for _ in range(BACKLOG + 1):
        changes.changed("c")
    assert changes.listeners == 0  # dropped: its stream ends
    assert [b async for b in stream] == []


async def test_typed_events_come_with_the_changes_to_who_may_see_them(
    world: World, people: People
) -> None:
    from paddockd.domain.webhooks import Event

    happenings = world.wired.box_events
    assert happenings is not None
    publishing = asyncio.get_running_loop().create_task(happenings.run())
    try:
        _, bob_events = await world.services.events.follow(people.bob)
        _, carol_events = await world.services.events.follow(people.carol)
        box = await world.boxes.create("bob-told", None, None, None, [], caller=people.bob)
        told: list[str] = []
        while "box.started" not in told:
            event = await asyncio.wait_for(anext(bob_events), 5)
            if isinstance(event, Event):
                assert event.box_id == box.id
                told.append(event.type)
        assert told[0] == "box.created"
        await nothing_more(carol_events)  # neither the box's changes nor its events
        for stream in (bob_events, carol_events):
            await stream.aclose()  # type: ignore[attr-defined]
        assert len(happenings._listeners) == 0
    finally:
        publishing.cancel()


async def test_refused_egress_is_told_once_a_minute_per_destination_and_bounded_per_box(
    world: World,
) -> None:
    from paddock.wire.models import EgressEvent
    from paddockd.services.box_events import EGRESS_PER_MINUTE

    happenings = world.wired.box_events
    listener = happenings.listen()
    box = await world.boxes.create("noisy", None, None, None)
    happenings.added(box)  # known to the events, as the store tells it
    while not listener.empty():
        listener.get_nowait()

    def refused(address: str, port: int = 443) -> EgressEvent:
        return EgressEvent("t", "connect", "refused", "", address, port, "tcp")

    for _ in range(5):  # one destination, again and again: told once
        happenings.egress_refused(box.id, refused("203.0.113.7"))
    for i in range(100):  # a hundred destinations: told up to the box's share
        happenings.egress_refused(box.id, refused(f"203.0.113.{i + 10}"))
    happenings.egress_refused("no-such-box", refused("203.0.113.8"))
    publishing = asyncio.get_running_loop().create_task(happenings.run())
    try:
        told = []
        while len(told) < EGRESS_PER_MINUTE:
            event = await asyncio.wait_for(listener.get(), 5)
            assert event is not None
            if event.type == "egress.refused":
                told.append(event)
        await asyncio.sleep(0.2)
        assert listener.empty()
        assert told[0].data == {
            "kind": "connect",
            "target": "203.0.113.7",
            "address": "203.0.113.7",
            "port": 443,
            "proto": "tcp",
        }
        assert len({e.data["address"] for e in told}) == EGRESS_PER_MINUTE
    finally:
        publishing.cancel()


def test_the_egress_log_tells_refusals_only(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from paddockd.services.egress import EgressLog

    log = EgressLog(tmp_path, lambda: datetime.now(timezone.utc))
    told: list[tuple[str, str]] = []
    log.refused = lambda box_id, event: told.append((box_id, event.name))
    log.dns("b1", "pypi.org", "allowed", ["203.0.113.1"])
    log.dns("b1", "evil.example", "refused", [])
    assert told == [("b1", "evil.example")]
