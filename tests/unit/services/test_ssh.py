"""SSH on fakes: each user's keys their own, a box's host key made once and kept (and gone
with the box), and a session's command carrying the caller's keys only."""

from __future__ import annotations

import asyncio

import pytest

from paddockd.domain.errors import Conflict, InvalidRequest, NotFound
from paddockd.store.ssh import SshRepository

from ..conftest import People, World

pytestmark = pytest.mark.anyio
ADA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAups6MCT+BrWaGbvO0pV6cq5wV1W/u0DBfe4BRpvxGX ada"
BOB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE7dQ4mVfkaBA9FgD6xg3OkzZX1x+0W1tG3Ck9xHnQ0a bob"


async def test_keys_sessions_and_host_keys(world: World, people: People) -> None:
    ssh, boxes = world.services.ssh, world.boxes
    await ssh.add_key("laptop", ADA, people.owner)
    await ssh.add_key("laptop", BOB, people.bob)  # a name is each user's own
    with pytest.raises(Conflict, match="registered already, as 'laptop'"):
        await ssh.add_key("again", ADA, people.owner)
    with pytest.raises(Conflict, match="named 'laptop' already"):
        await ssh.add_key("laptop", BOB, people.owner)
    assert [k.name for k in await ssh.keys(people.carol)] == []

    box = await boxes.create("bobs", None, None, None, caller=people.bob)
    argv = await ssh.session("bobs", people.bob)
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-1].startswith("-----BEGIN OPENSSH PRIVATE")
    config, keys = argv[4], argv[5]
    assert "AuthenticationMethods publickey" in config and "PasswordAuthentication no" in config
    assert keys == BOB.rsplit(" ", 1)[0] + " bob\n"  # bob's key, and only his
    # Another member cannot open one, nor learn its host key.
    for ask in (ssh.session("bobs", people.carol), ssh.host_key("bobs", people.carol)):
        with pytest.raises(NotFound):
            await ask
    await boxes.create("carols", None, None, None, caller=people.carol)
    with pytest.raises(InvalidRequest, match="no SSH key registered"):
        await ssh.session("carols", people.carol)
    # The host key is made once and kept; it goes with the box.
    first = await ssh.host_key("bobs", people.bob)
    assert first.startswith("ssh-ed25519 ") and first == await ssh.host_key(box.id, people.bob)
    await boxes.delete(box.id, force=True, caller=people.bob)
    for _ in range(100):  # a deletion finishes in the background
        if await world.repo.get(box.id) is None:
            break
        await asyncio.sleep(0.01)
    assert await SshRepository(world.db).host_key(box.id) is None
    await ssh.delete_key("laptop", people.bob)
    with pytest.raises(NotFound):
        await ssh.delete_key("laptop", people.bob)
    assert [k.name for k in await ssh.keys(people.owner)] == ["laptop"]
