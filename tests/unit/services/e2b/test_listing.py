"""E2B's listing (e2b/listing.py): filters, order and pages that hold while boxes change."""

from __future__ import annotations

from datetime import timedelta

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.services.e2b.listing import Query, decode_token, encode_token
from paddockd.services.e2b.service import Sandbox

from ...conftest import World

pytestmark = pytest.mark.anyio


async def _make(world: World, n: int, metadata: dict[str, str]) -> list[str]:
    """`n` sandboxes, made a second apart and paused (the fake server has room for 3)."""
    caller = await world.services.e2b.authenticate(world.token)
    made = []
    for _ in range(n):
        s = await world.services.e2b.create(caller, "base", 600, metadata, {}, None, None)
        await world.boxes.stop(s.box.id)
        made.append(s.box.id)
        world.clock.advance(1)
    return made


async def _all_pages(world: World, query: Query) -> list[list[str]]:
    caller = await world.services.e2b.authenticate(world.token)
    pages = []
    while True:
        found, token = await world.services.e2b.listed(caller, query)
        pages.append([s.box.id for s in found])
        if token is None:
            return pages
        query = Query(**{**query.__dict__, "next_token": token})


def _ids(found: list[Sandbox]) -> list[str]:
    return [s.box.id for s in found]


async def test_pages_in_creation_order_both_ways(world: World) -> None:
    made = await _make(world, 5, {"job": "a"})
    await _make(world, 1, {"job": "b"})
    assert await _all_pages(world, Query({"job": "a"}, limit=2)) == [made[:2], made[2:4], made[4:]]
    newest = list(reversed(made))
    assert await _all_pages(world, Query({"job": "a"}, order="desc", limit=3)) == [
        newest[:3],
        newest[3:],
    ]
    assert await _all_pages(world, Query({"job": "a"})) == [made]


async def test_a_page_boundary_survives_deletes_and_resumes(world: World) -> None:
    made = await _make(world, 4, {})
    caller = await world.services.e2b.authenticate(world.token)
    first, token = await world.services.e2b.listed(caller, Query(limit=2))
    assert _ids(first) == made[:2]
    # The last one shown goes, and another is resumed (a new start time).
    await world.boxes.delete(made[1], force=True)
    await world.reconciler.drain()
    await world.boxes.resume(made[2])
    rest, token = await world.services.e2b.listed(caller, Query(limit=2, next_token=token))
    assert (_ids(rest), token) == (made[2:], None)


async def test_filters_by_state_and_template(world: World) -> None:
    made = await _make(world, 2, {})
    await world.boxes.resume(made[1])
    caller = await world.services.e2b.authenticate(world.token)
    paused, _ = await world.services.e2b.listed(caller, Query(states=frozenset({"paused"})))
    assert _ids(paused) == [made[0]]
    running, _ = await world.services.e2b.listed(caller, Query(states=frozenset({"running"})))
    assert _ids(running) == [made[1]]
    assert _ids((await world.services.e2b.listed(caller, Query(template="base")))[0]) == made
    assert (await world.services.e2b.listed(caller, Query(template="other")))[0] == []
    # made[1] was started again just now: only it started after the first was made.
    first = (await world.boxes.resolve(made[0])).created_at
    later, _ = await world.services.e2b.listed(
        caller, Query(started_after=first + timedelta(seconds=1))
    )
    assert _ids(later) == [made[1]]


def test_tokens_read_back_and_junk_is_refused() -> None:
    key = (1767225600.123456, "a" * 32)
    assert decode_token(encode_token(key)) == key
    for junk in ("", "!!!", encode_token((1.0, "not-an-id")), "bm90IGEgdG9rZW4"):
        with pytest.raises(InvalidRequest, match="nextToken"):
            decode_token(junk)
