"""Snapshots, restore, fork and drives on the fake engine."""

from __future__ import annotations

from dataclasses import replace

import pytest

from paddockd.domain.box import BoxState
from paddockd.domain.errors import (
    CapacityExceeded,
    Conflict,
    EngineUnavailable,
    InvalidRequest,
    InvalidState,
    NotFound,
    PaddockError,
)

from ..conftest import World

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_live_snapshot_with_label_becomes_current(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    snap = await world.services.snapshots.take("b", "before-upgrade")
    assert snap.seq == 1 and snap.kind == "live" and snap.size == 4096
    assert (await world.boxes.resolve("b")).current_snapshot == snap.image
    with pytest.raises(Conflict):
        await world.services.snapshots.take("b", "before-upgrade")
    with pytest.raises(InvalidRequest):
        await world.services.snapshots.take("b", "12")
    assert world.runtime.by_id[box.container_id or ""]["running"]


async def test_restore_recreates_the_container_from_the_snapshot(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    first = await world.services.snapshots.take("b", "one")
    await world.services.snapshots.take("b", "two")
    restored = await world.services.snapshots.restore("b", "one")
    assert restored.state == BoxState.RUNNING and restored.current_snapshot == first.image
    spec = world.runtime.by_id[restored.container_id or ""]["spec"]
    assert spec.image == first.image and len(world.runtime.by_id) == 1
    with pytest.raises(NotFound):
        await world.services.snapshots.restore("b", "nope")


async def test_restore_of_a_stopped_box_stays_stopped_and_resumes_from_it(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    first = await world.services.snapshots.take("b", None)
    await world.boxes.stop("b")
    stopped = await world.services.snapshots.restore("b", str(first.seq))
    assert stopped.state == BoxState.STOPPED and stopped.container_id is None
    resumed = await world.boxes.resume("b")
    assert world.runtime.by_id[resumed.container_id or ""]["spec"].image == first.image


async def test_restore_mid_stop_is_refused(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    snap = await world.services.snapshots.take("b", None)
    await world.repo.update(box, state=BoxState.STOPPING)
    with pytest.raises(InvalidState, match="stopping"):
        await world.services.snapshots.restore("b", str(snap.seq))


async def test_fork_live_and_from_snapshot_keep_type_ttl_and_drives(world: World) -> None:
    await world.boxes.create("src", "small", 600, "delete", ["cache"])
    snap = await world.services.snapshots.take("src", "s1")
    live = await world.services.snapshots.fork("src", "copy", None)
    assert live.type == "small" and live.ttl == 600 and live.drives == ("cache",)
    assert live.image.startswith("paddock-snapshots/")
    old = await world.services.snapshots.fork("src", "old", "s1")
    assert old.image == snap.image
    with pytest.raises(Conflict):
        await world.services.snapshots.fork("src", "copy", None)
    # The source's snapshot is the fork's base: it cannot go, not even with the source.
    with pytest.raises(Conflict, match="base of box"):
        await world.services.snapshots.remove("src", "s1")
    await world.boxes.delete("src", force=True)
    await world.reconciler.drain()  # storage goes in the background
    assert snap.image in world.runtime.images
    await world.boxes.delete("old", force=True)
    await world.reconciler.drain()  # storage goes in the background
    assert snap.image not in world.runtime.images


async def test_deleting_a_fork_keeps_the_snapshot_its_source_still_lists(world: World) -> None:
    await world.boxes.create("src", None, None, None)
    snap = await world.services.snapshots.take("src", "s1")
    await world.services.snapshots.take("src", "s2")  # s1 is no longer the current one
    await world.services.snapshots.fork("src", "old", "s1")
    await world.boxes.delete("old", force=True)
    await world.reconciler.drain()  # storage goes in the background
    assert snap.image in world.runtime.images
    restored = await world.services.snapshots.restore("src", "s1")
    assert world.runtime.by_id[restored.container_id or ""]["spec"].image == snap.image
    # Once its source lets it go, it goes.
    await world.services.snapshots.restore("src", "s2")
    await world.services.snapshots.remove("src", "s1")
    assert snap.image not in world.runtime.images


async def test_a_snapshot_can_go_as_soon_as_its_fork_is_deleted(world: World) -> None:
    await world.boxes.create("src", None, None, None)
    snap = await world.services.snapshots.take("src", "s1")
    await world.services.snapshots.take("src", "s2")
    await world.services.snapshots.fork("src", "old", "s1")
    with pytest.raises(Conflict, match="base of box"):
        await world.services.snapshots.remove("src", "s1")
    # The fork's container is gone at once; its storage goes in the background, later.
    await world.boxes.delete("old", force=True)
    await world.services.snapshots.remove("src", "s1")
    assert snap.image not in world.runtime.images
    await world.reconciler.drain()
    assert [s.label for s in (await world.services.snapshots.list("src"))[1]] == ["s2"]


async def test_retention_keeps_the_newest_automatic_snapshots(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    await world.services.snapshots.take("b", "keep-me")
    for _ in range(4):
        await world.boxes.stop("b")
        await world.boxes.resume("b")
    kinds = [
        (s.seq, s.kind) for s in await world.repo.snapshots((await world.boxes.resolve("b")).id)
    ]
    assert [k for _, k in kinds].count("stop") == 2  # retention=2 in the test world
    assert "live" in [k for _, k in kinds]


async def test_a_failed_commit_leaves_no_snapshot_and_says_why(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    world.runtime.fail_next["commit"] = PaddockError("no space left on device")
    with pytest.raises(PaddockError, match="no space left"):
        await world.services.snapshots.take("b", None)
    box = await world.boxes.resolve("b")
    assert await world.repo.snapshots(box.id) == []
    assert box.state == BoxState.RUNNING or box.state == BoxState.ERROR


async def test_drives_are_created_shared_listed_and_protected(world: World) -> None:
    await world.boxes.create("a", None, None, None, ["data", "ref:ro"])
    await world.boxes.create("b", None, None, None, ["data"])
    spec = next(iter(world.runtime.by_id.values()))["spec"]
    assert [(m.volume, m.target, m.read_only) for m in spec.mounts][1:] == [
        ("paddock-drive-data", "/mnt/data", False),
        ("paddock-drive-ref", "/mnt/ref", True),
    ]
    assert spec.mounts[0].target == "/var/lib/docker"
    drives = {d.name: d for d in await world.services.drives.all()}
    assert drives["data"].boxes == ["a", "b"] and drives["ref"].boxes == ["a"]
    with pytest.raises(Conflict, match="a, b"):
        await world.services.drives.remove("data")
    await world.boxes.delete("a", force=True)
    await world.reconciler.drain()  # storage goes in the background
    await world.boxes.delete("b", force=True)
    await world.reconciler.drain()  # storage goes in the background
    await world.services.drives.remove("data")
    assert "paddock-drive-data" not in world.runtime.volume_by_name
    assert "paddock-drive-ref" in world.runtime.volume_by_name  # outlives its boxes


@pytest.mark.parametrize("spec", ["../etc", "a/b", "UP", "x:rw:ro", "x:exec", ""])
async def test_bad_drive_specs(world: World, spec: str) -> None:
    with pytest.raises(InvalidRequest):
        await world.boxes.create("b", None, None, None, [spec])
    assert world.runtime.by_id == {}


async def test_the_same_drive_twice_is_refused(world: World) -> None:
    with pytest.raises(InvalidRequest, match="only once"):
        await world.boxes.create("b", None, None, None, ["d", "d:ro"])


class Crashed(BaseException):
    """paddockd killed at a fault point: nothing after it runs, no handler sees it."""


async def test_a_restore_killed_after_its_row_finishes_on_the_next_pass(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paddockd import faults

    def point(name: str) -> None:
        if name == "restore.saved":
            raise Crashed

    await world.boxes.create("b", None, None, None)
    first = await world.services.snapshots.take("b", "one")
    await world.services.snapshots.take("b", "two")
    monkeypatch.setattr(faults, "point", point)
    with pytest.raises(Crashed):
        await world.services.snapshots.restore("b", "one")
    monkeypatch.undo()
    await world.reconciler.reconcile_all()
    box = await world.boxes.resolve("b")
    assert box.state == BoxState.RUNNING and box.current_snapshot == first.image
    assert [c["spec"].image for c in world.runtime.by_id.values()] == [first.image]


async def test_a_fork_that_does_not_fit_is_refused_before_any_snapshot(world: World) -> None:
    await world.boxes.create("src", "small", None, None)
    await world.boxes.create("a", "small", None, None)
    await world.boxes.create("b", "small", None, None)  # the server's memory is all taken
    images = set(world.runtime.images)
    for _ in range(3):  # retries leave nothing either
        with pytest.raises(CapacityExceeded, match="server is full") as refused:
            await world.services.snapshots.fork("src", "copy", None)
        message = refused.value.message
        assert "your running boxes (src, a, b" in message and "paddock status" in message
    assert await world.repo.snapshots((await world.boxes.resolve("src")).id) == []
    assert set(world.runtime.images) == images
    with pytest.raises(NotFound, match="unknown box type"):
        await world.services.snapshots.fork("src", "copy", None, type_name="huge")


async def test_a_fork_that_fails_after_its_snapshot_takes_the_snapshot_back(
    world: World,
) -> None:
    await world.boxes.create("src", None, None, None)
    kept = await world.services.snapshots.take("src", "kept")
    world.runtime.fail_next["start"] = EngineUnavailable("engine down")
    with pytest.raises(EngineUnavailable):
        await world.services.snapshots.fork("src", "copy", None)
    src = await world.boxes.resolve("src")
    assert [s.label for s in await world.repo.snapshots(src.id)] == ["kept"]
    assert src.current_snapshot == kept.image
    assert not [i for i in world.runtime.images if "fork" in i]


async def test_fork_takes_another_type(world: World) -> None:
    world.boxes.capacity = replace(world.boxes.capacity, memory_mb=8192)
    await world.boxes.create("src", "small", None, None)
    fork = await world.services.snapshots.fork("src", "big", None, type_name="medium")
    assert fork.type == "medium" and fork.cpus == 2.0
