"""Drives and provider keys are per user, on fakes: names are per user, a box mounts and
gets only its owner's, a member reaches only their own (another's is missing, 404), and the
owner sees everyone's; what was made before accounts stays the owner's."""

from __future__ import annotations

import pytest

from paddockd.domain.errors import Conflict, InvalidRequest, NotFound, StorageLow
from paddockd.runtime.base import LABEL_DRIVE, LABEL_INSTANCE, LABEL_OWNER
from paddockd.services.credentials import ProviderStatus

from ..conftest import People, World

pytestmark = pytest.mark.anyio

BOBS = "sk-ant-bob-0123456789"
OWNERS = "sk-ant-owner-0123456789"


def mounts(world: World, box_id: str) -> dict[str, str]:
    """target -> volume of the box's container."""
    for info in world.runtime.by_id.values():
        if info["spec"].box_id == box_id:
            return {m.target: m.volume for m in info["spec"].mounts[1:]}
    raise AssertionError(f"no container for {box_id}")


async def test_each_user_has_their_own_drive_of_a_name(world: World, people: People) -> None:
    drives = world.services.drives
    mine = await world.boxes.create("ada-box", None, None, None, ["data"], caller=people.owner)
    bobs = await world.boxes.create("bob-box", None, None, None, ["data"], caller=people.bob)
    carols = await world.boxes.create("carol-box", None, None, None, ["data"], caller=people.carol)
    volumes = {mounts(world, b.id)["/mnt/data"] for b in (mine, bobs, carols)}
    assert volumes == {
        "paddock-drive-data",  # the owner's keep the name drives always had
        f"paddock-user-{people.bob.id}-drive-data",
        f"paddock-user-{people.carol.id}-drive-data",
    }
    labels = world.runtime.volume_by_name[f"paddock-user-{people.bob.id}-drive-data"].labels
    assert labels[LABEL_OWNER] == people.bob.id
    assert LABEL_OWNER not in world.runtime.volume_by_name["paddock-drive-data"].labels
    # A member sees their own; the owner everyone's, each with its own users.
    [seen] = await drives.all(people.bob)
    assert (seen.name, seen.boxes, seen.holder) == ("data", ["bob-box"], people.bob.id)
    everyone = {d.holder: d.boxes for d in await drives.all(people.owner)}
    assert everyone == {
        None: ["ada-box"],
        people.bob.id: ["bob-box"],
        people.carol.id: ["carol-box"],
    }
    # In use by one's own box only: another user's box of that drive name is no matter.
    with pytest.raises(Conflict, match="carol-box") as refused:
        await drives.remove("data", people.carol)
    assert refused.value.details == {"boxes": ["carol-box"]}
    await world.boxes.delete("carol-box", force=True, caller=people.carol)
    await world.reconciler.drain()
    await drives.remove("data", people.carol)
    assert f"paddock-user-{people.carol.id}-drive-data" not in world.runtime.volume_by_name
    assert len(await drives.all(people.owner)) == 2


async def test_a_member_cannot_reach_another_users_drive(world: World, people: People) -> None:
    drives = world.services.drives
    await drives.create("notes", people.carol)
    await drives.create("notes", people.owner)
    assert await drives.all(people.bob) == []
    for owner in ("carol", "ada", people.carol.id, None):
        with pytest.raises(NotFound) as missing:
            await drives.remove("notes", people.bob, owner)
        assert "no drive named 'notes'" in missing.value.message
    # Naming another user's drive makes one's own of that name, empty.
    bobs = await world.boxes.create("b", None, None, None, ["notes"], caller=people.bob)
    assert mounts(world, bobs.id)["/mnt/notes"] == f"paddock-user-{people.bob.id}-drive-notes"
    assert len([d for d in await drives.all(people.owner) if d.name == "notes"]) == 3
    with pytest.raises(Conflict, match="already exists"):
        await drives.create("notes", people.bob)
    # Naming oneself is allowed, as is the owner naming anyone.
    await world.boxes.delete("b", force=True, caller=people.bob)
    await world.reconciler.drain()
    await drives.remove("notes", people.bob, "bob")
    await drives.remove("notes", people.owner, "carol")
    assert [d.holder for d in await drives.all(people.owner)] == [None]


async def test_drives_from_before_accounts_stay_the_owners(world: World, people: People) -> None:
    old = {LABEL_INSTANCE: world.cfg.instance, LABEL_DRIVE: "old"}
    await world.runtime.create_volume("paddock-drive-old", old)
    theirs = await world.boxes.create("made-by-token", None, None, None, ["old"])
    mine = await world.boxes.create("ada-box", None, None, None, ["old"], caller=people.owner)
    bobs = await world.boxes.create("bob-box", None, None, None, ["old"], caller=people.bob)
    assert mounts(world, theirs.id)["/mnt/old"] == "paddock-drive-old"
    assert mounts(world, mine.id)["/mnt/old"] == "paddock-drive-old"
    assert mounts(world, bobs.id)["/mnt/old"] == f"paddock-user-{people.bob.id}-drive-old"
    owners = {d.holder: d.boxes for d in await world.services.drives.all(people.owner)}
    assert owners[None] == ["made-by-token", "ada-box"]


async def test_removing_a_member_keeps_their_drives_and_forgets_their_keys(
    world: World, people: People
) -> None:
    await world.boxes.create("bob-box", None, None, None, ["data"], caller=people.bob)
    await world.services.credentials.set("anthropic", BOBS, caller=people.bob)
    await world.services.credentials.attach("bob-box", "anthropic", people.bob)
    await world.services.credentials.set("anthropic", OWNERS, caller=people.owner)
    await world.services.members.remove(people.owner, "bob")
    kept = await world.services.drives.all(people.owner)
    assert [(d.name, d.holder) for d in kept] == [("data", people.bob.id)]
    # The removed member's key is gone (the owner's is not), and nothing reaches their box.
    box = await world.boxes.resolve("bob-box")
    assert await world.services.credentials.env_for(box, ["anthropic"]) == {}
    assert await world.services.credentials.attached("bob-box") == []
    owners = await world.services.credentials.statuses(people.owner)
    assert next(s for s in owners if s.provider == "anthropic").configured
    # The owner names a removed account's drive by its id (its username is gone).
    with pytest.raises(NotFound):
        await world.services.drives.remove("data", people.owner, "bob")
    await world.boxes.delete("bob-box", force=True)
    await world.reconciler.drain()
    await world.services.drives.remove("data", people.owner, people.bob.id)
    assert await world.services.drives.all(people.owner) == []


def configured(statuses: list[ProviderStatus]) -> set[str]:
    return {s.provider for s in statuses if s.configured}


async def test_keys_are_per_user(world: World, people: People) -> None:
    keys = world.services.credentials
    await keys.set("anthropic", BOBS, caller=people.bob)
    assert configured(await keys.statuses(people.bob)) == {"anthropic"}
    assert configured(await keys.statuses(people.owner)) == set()
    assert configured(await keys.statuses(people.carol)) == set()
    await keys.set("openai", "sk-openai-owner-0123456789", caller=people.owner)
    # Server tokens and paddockd itself are the owner: the same keys.
    assert configured(await keys.statuses()) == {"openai"}
    assert configured(await keys.statuses(people.bob)) == {"anthropic"}
    with pytest.raises(NotFound):
        await keys.delete("openai", people.bob)
    await keys.delete("anthropic", people.bob)
    assert configured(await keys.statuses(people.bob)) == set()
    agents = {a.name: a.credentials for a in await world.services.agents.all(people.owner)}
    assert agents["codex"] and not agents["claude"]
    agents = {a.name: a.credentials for a in await world.services.agents.all(people.bob)}
    assert not agents["codex"]


async def test_a_box_gets_only_its_owners_keys(world: World, people: People) -> None:
    # In env mode, where the box gets the key itself (the gateway's choice of key is
    # tested in test_gateway.py).
    keys = world.services.credentials
    await keys.set("anthropic", BOBS, caller=people.bob, mode="env")
    await keys.set("anthropic", OWNERS, caller=people.owner, mode="env")
    await keys.set("openai", "sk-openai-owner-0123456789", caller=people.owner, mode="env")
    bobs = await world.boxes.create("bob-box", None, None, None, caller=people.bob)
    mine = await world.boxes.create("ada-box", None, None, None, caller=people.owner)

    async def env_of(box: str) -> dict[str, str]:
        await world.boxes.run(box, ["env"])
        return world.runtime.execs[-1].env

    # The owner attaching to a member's box gives it the member's key, never the owner's.
    assert await keys.attach("bob-box", "anthropic", people.owner) == ["anthropic"]
    assert (await env_of("bob-box"))["ANTHROPIC_API_KEY"] == BOBS
    await keys.attach("ada-box", "anthropic", people.owner)
    assert (await env_of("ada-box"))["ANTHROPIC_API_KEY"] == OWNERS
    # A key the box's owner lacks is missing, however many the caller has.
    with pytest.raises(NotFound, match="bob-box gets only its owner's keys, and bob") as why:
        await keys.attach("bob-box", "openai", people.owner)
    assert "owner-0123" not in why.value.message
    with pytest.raises(NotFound, match="paddock auth set openai"):
        await keys.attach("bob-box", "openai", people.bob)
    with pytest.raises(NotFound, match="no box named"):
        await keys.attach("ada-box", "anthropic", people.bob)
    # Runs too: the box owner's key, whoever starts them.
    await world.services.runs.start("bob-box", "claude", "hi", None, None, caller=people.owner)
    assert world.runtime.execs[-1].env["ANTHROPIC_API_KEY"] == BOBS
    await world.services.runs.start("bob-box", "claude", "hi", None, None, caller=people.bob)
    assert world.runtime.execs[-1].env["ANTHROPIC_API_KEY"] == BOBS
    await world.boxes.create("carol-box", None, None, None, caller=people.carol)
    with pytest.raises(InvalidRequest, match="carol has not set one"):
        await world.services.runs.start(
            "carol-box", "claude", "hi", None, None, caller=people.owner
        )
    # Forgetting a key detaches it from its holder's boxes only.
    await keys.delete("anthropic", people.bob)
    assert await keys.attached("bob-box") == []
    assert await keys.attached("ada-box") == ["anthropic"]
    assert "ANTHROPIC_API_KEY" not in await env_of(bobs.name)
    assert (await env_of(mine.name))["ANTHROPIC_API_KEY"] == OWNERS


async def test_a_drive_size_is_checked_kept_and_shown(world: World, people: People) -> None:
    drives = world.services.drives
    for wrong in (0, 63, (16 << 20) + 1):
        with pytest.raises(InvalidRequest, match="64 MiB to 16 TiB"):
            await drives.create("sized", people.bob, capacity_mb=wrong)
    assert world.runtime.volume_sizes == {}  # nothing was made
    made = await drives.create("sized", people.bob, capacity_mb=2048)
    assert made.capacity_mb == 2048
    volume = f"paddock-user-{people.bob.id}-drive-sized"
    assert world.runtime.volume_sizes[volume] == 2048 << 20
    await drives.create("plain", people.bob)
    sizes = {d.name: d.capacity_mb for d in await drives.all(people.bob)}
    assert sizes == {"sized": 2048, "plain": None}


async def test_a_sized_drive_is_refused_when_the_engine_disk_is_nearly_full(
    world: World, people: People, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Full:
        f_bavail, f_frsize = 100, 1 << 20  # 100 MiB

    monkeypatch.setattr("paddockd.services.capacity.os.statvfs", lambda _: Full)
    with pytest.raises(StorageLow, match="not enough disk for a drive with a size"):
        await world.services.drives.create("sized", people.bob, capacity_mb=2048)
    assert world.runtime.volume_sizes == {}
