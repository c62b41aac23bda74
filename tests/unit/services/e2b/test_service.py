"""E2B's sandboxes over the box services (e2b/service.py, e2b/snapshots.py), on fakes."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest

from paddockd.domain.box import BoxState, Desired
from paddockd.domain.errors import CapacityExceeded, InvalidRequest, NotFound, Unauthorized
from paddockd.services.e2b.envd_tokens import EnvdTokens

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


async def test_an_envd_token_opens_its_own_sandbox_only(world: World, people: People) -> None:
    e2b = world.services.e2b
    owner = await e2b.authenticate(world.token)
    mine = await e2b.create(owner, "base", 600, {}, {}, None, None)
    bobs = await e2b.create(people.bob, "base", 600, {}, {}, None, None)
    token = e2b.envd_token(mine.box.id)
    assert token.startswith("pde_") and token != e2b.envd_token(bobs.box.id)
    acting = await e2b.authenticate(token, mine.box.id)
    assert (await e2b.get(acting, mine.box.id)).box.id == mine.box.id
    # As the box's owner, but a member: another user's sandbox stays out of reach.
    with pytest.raises(NotFound):
        await e2b.get(acting, bobs.box.id)
    for sandbox in (bobs.box.id, None, ""):
        with pytest.raises(Unauthorized):
            await e2b.authenticate(token, sandbox)
    with pytest.raises(Unauthorized):
        await e2b.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"), mine.box.id)


async def test_a_signed_link_names_its_sandbox_and_expires(world: World, people: People) -> None:
    e2b = world.services.e2b
    owner = await e2b.authenticate(world.token)
    await e2b.create(people.bob, "base", 600, {}, {}, None, None)
    mine = await e2b.create(owner, "base", 600, {}, {}, None, None)
    signature = sdk_signature("/home/user/a.txt", "read", "", e2b.envd_token(mine.box.id), None)
    # The server's own maker is the same formula, whatever its key.
    made = EnvdTokens(b"k").signature("s", "/p", "read", "", None)
    assert made == sdk_signature("/p", "read", "", EnvdTokens(b"k").of("s"), None)
    caller, box = await e2b.signed("/home/user/a.txt", "read", "", signature, None)
    assert box.id == mine.box.id and caller.id == (mine.box.owner_id or "")
    for path, op, user in (
        ("/home/user/b.txt", "read", ""),
        ("/home/user/a.txt", "write", ""),
        ("/home/user/a.txt", "read", "root"),
    ):
        with pytest.raises(Unauthorized):
            await e2b.signed(path, op, user, signature, None)
    now = int(world.clock().timestamp())
    later = sdk_signature("/a", "write", "user", e2b.envd_token(mine.box.id), now + 60)
    assert (await e2b.signed("/a", "write", "user", later, now + 60))[1].id == mine.box.id
    past = sdk_signature("/a", "write", "user", e2b.envd_token(mine.box.id), now - 1)
    with pytest.raises(Unauthorized, match="expired"):
        await e2b.signed("/a", "write", "user", past, now - 1)
    with pytest.raises(InvalidRequest):
        await e2b.signed("/a", "delete", "user", later, now + 60)


def sdk_signature(path: str, operation: str, user: str, token: str, expiration: int | None) -> str:
    """What E2B's SDK computes (e2b/sandbox/signature.py), written out here on purpose."""
    raw = f"{path}:{operation}:{user}:{token}" + ("" if expiration is None else f":{expiration}")
    return "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).rstrip(b"=").decode()
