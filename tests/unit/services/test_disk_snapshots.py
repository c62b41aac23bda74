"""Snapshots, restores and forks as copies of a box's disk, on the fake engine (where disks
copy: FakeRuntime.copies). The real copies are tests/integration/test_disk_copies.py's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from paddockd.domain.box import BoxState
from paddockd.domain.errors import CapacityExceeded, Conflict, EngineUnavailable, InvalidRequest

from ..conftest import World

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def copying(world: World) -> World:
    world.runtime.copies = True
    return world


def _spec(world: World, cid: str | None):  # type: ignore[no-untyped-def]
    return world.runtime.by_id[cid or ""]["spec"]


async def test_a_snapshot_is_a_copy_of_the_disk_over_the_containers_image(
    copying: World,
) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    snap = await w.services.snapshots.take("b", "one")
    assert (snap.disk or "").startswith(f"{box.id}/1r")  # never a deleted one's name again
    assert w.runtime.saved[snap.disk or ""] == box.container_id
    assert snap.image == "sha256:paddock-box:latest"  # the image by id, not by tag
    now = await w.boxes.resolve("b")
    assert (now.current_disk, now.current_snapshot) == (snap.disk, snap.image)
    assert "commit" not in w.runtime.calls
    assert snap.holds(now)


async def test_restore_makes_the_container_from_a_copy_of_the_snapshot(copying: World) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    first = await w.services.snapshots.take("b", "one")
    await w.services.snapshots.take("b", "two")
    restored = await w.services.snapshots.restore("b", "one")
    assert restored.state == BoxState.RUNNING and restored.current_disk == first.disk
    # In place: the box's own container, stopped, given a copy of the snapshot's disk.
    assert restored.container_id == box.container_id
    assert w.runtime.by_id[box.container_id or ""]["image_id"] == first.image
    assert _spec(w, restored.container_id).disk == first.disk
    assert "create" not in w.runtime.calls[w.runtime.calls.index("load_disk") :]
    # Restoring copies: the snapshot stays. The one the box stands on can go too (as
    # E2B deletes a running sandbox's newest): the box keeps a copy of its own.
    await w.services.snapshots.remove("b", "one")
    now = await w.boxes.resolve("b")
    assert now.current_disk and now.current_disk.startswith(f"{now.id}/0r")
    assert first.disk not in w.runtime.saved and now.current_disk in w.runtime.saved
    await w.services.snapshots.remove("b", "two")
    assert sorted(w.runtime.saved) == [now.current_disk]
    # And a restore of another snapshot later still works from what is kept.
    third = await w.services.snapshots.take("b", "three")
    restored = await w.services.snapshots.restore("b", "three")
    assert restored.current_disk == third.disk


async def test_a_restore_that_cannot_load_in_place_makes_a_new_container(
    copying: World,
) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    snap = await w.services.snapshots.take("b", "one")
    w.runtime.fail_next["load_disk"] = EngineUnavailable("the disk did not mount")
    restored = await w.services.snapshots.restore("b", "one")
    assert restored.state == BoxState.RUNNING and restored.container_id != box.container_id
    assert _spec(w, restored.container_id).disk == snap.disk
    assert box.container_id not in w.runtime.by_id  # the old one went


async def test_a_box_made_without_views_is_restored_into_a_new_container(
    copying: World,
) -> None:
    w = copying
    w.runtime.views = False  # LXCFS down when the box was made
    box = await w.boxes.create("b", None, None, None)
    await w.services.snapshots.take("b", "one")
    w.runtime.views = True
    restored = await w.services.snapshots.restore("b", "one")
    assert restored.container_id != box.container_id
    assert w.runtime.by_id[restored.container_id or ""]["views"]


async def test_forks_get_copies_of_their_own_and_the_source_keeps_nothing(
    copying: World,
) -> None:
    w = copying
    w.boxes.capacity = replace(w.boxes.capacity, memory_mb=8192)
    src = await w.boxes.create("src", None, None, None)
    forks = await w.services.snapshots.fork_count("src", 3, "f", None)
    assert [f.name for f in forks] == ["f-1", "f-2", "f-3"]
    assert await w.repo.snapshots(src.id) == []  # no snapshot left on the source
    for fork in forks:
        (own,) = await w.repo.snapshots(fork.id)
        assert own.kind == "fork" and (own.disk or "").startswith(f"{fork.id}/1r")
        assert _spec(w, fork.container_id).disk == own.disk
    # Only the forks' own copies are left: the one taken of the source went.
    assert sorted(k.split("/")[0] for k in w.runtime.saved) == sorted(f.id for f in forks)
    await w.boxes.delete("f-2", force=True)
    await w.reconciler.drain()
    assert not [k for k in w.runtime.saved if k.startswith(forks[1].id)]


async def test_many_forks_are_all_or_nothing(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)  # 1 of 3 GiB taken: two more fit
    boxes = {b.name for b in await w.repo.all()}
    with pytest.raises(CapacityExceeded, match="server is full") as refused:
        await w.services.snapshots.fork_count("src", 3, "f", None)
    assert "f-1" not in refused.value.message  # the planned ones are no one's to stop
    assert "save_disk" not in w.runtime.calls  # refused before anything was copied
    # A fork that fails once copying has begun takes the others back with it.
    w.runtime.fail_next["start"] = EngineUnavailable("engine down")
    with pytest.raises(EngineUnavailable):
        await w.services.snapshots.fork_count("src", 2, "g", None)
    await w.reconciler.drain()
    assert {b.name for b in await w.repo.all()} == boxes
    assert w.runtime.saved == {}
    with pytest.raises(InvalidRequest, match="count must be 1 to 100"):
        await w.services.snapshots.fork_count("src", 0, None, None)
    with pytest.raises(InvalidRequest, match="invalid box name"):
        await w.services.snapshots.fork_count("src", 1, "Bad Name", None)


async def test_retention_and_delete_drop_the_copies(copying: World) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    for _ in range(4):
        await w.boxes.stop("b")
        await w.boxes.resume("b")
    kept = [s.disk for s in await w.repo.snapshots(box.id)]
    assert len(kept) == 2 and sorted(w.runtime.saved) == sorted(kept)  # retention=2
    await w.boxes.delete("b", force=True)
    await w.reconciler.drain()
    assert w.runtime.saved == {}
    assert "paddock-box:latest" in w.runtime.images  # the copies' base is not theirs


async def test_a_box_keeps_its_own_count_of_stop_snapshots_and_its_forks_too(
    copying: World,
) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None, keep=3)
    assert box.keep == 3
    for _ in range(5):
        await w.boxes.stop("b")
        await w.boxes.resume("b")
    assert len(await w.repo.snapshots(box.id)) == 3  # not the server's 2
    fork = await w.services.snapshots.fork("b", "f", None)
    assert fork.keep == 3
    with pytest.raises(InvalidRequest, match="1 to 50 stop snapshots"):
        await w.boxes.create("c", None, None, None, keep=0)
    with pytest.raises(InvalidRequest, match="1 to 50 stop snapshots"):
        await w.boxes.create("c", None, None, None, keep=51)


async def test_the_sweep_drops_copies_no_row_names(copying: World) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    snap = await w.services.snapshots.take("b", None)
    w.runtime.saved["forks/abc"] = box.container_id or ""  # a crash mid-fork
    w.runtime.saved[f"{box.id}/9"] = box.container_id or ""  # a crash before its row
    w.reconciler.committing.add("forks/def")
    w.runtime.saved["forks/def"] = box.container_id or ""  # being made now
    await w.reconciler.reconcile_all()
    assert sorted(w.runtime.saved) == sorted([snap.disk or "", "forks/def"])


async def test_a_box_keeps_at_most_its_limit_of_snapshots(copying: World) -> None:
    w = copying
    w.services.snapshots._limit = 2
    await w.boxes.create("b", None, None, None)
    await w.services.snapshots.take("b", None)
    await w.services.snapshots.take("b", None)
    with pytest.raises(Conflict, match="2 snapshots, the most a box keeps"):
        await w.services.snapshots.take("b", None)


async def test_a_lost_container_comes_back_from_its_copy(copying: World) -> None:
    w = copying
    box = await w.boxes.create("b", None, None, None)
    snap = await w.services.snapshots.take("b", None)
    w.runtime.by_id.clear()
    back = await w.reconciler.reconcile(box.id)
    assert back is not None and back.state == BoxState.RUNNING
    assert _spec(w, back.container_id).disk == snap.disk
