"""The sweep of unreferenced snapshot images, on the fake engine."""

from __future__ import annotations

import pytest

from paddockd.runtime.base import LABEL_INSTANCE
from paddockd.services.image_sweep import ImageSweeper

from ..conftest import World

pytestmark = pytest.mark.anyio


def sweeper(world: World, grace: float = 600) -> ImageSweeper:
    return ImageSweeper(
        world.repo,
        world.runtime,
        world.reconciler,
        instance="test",
        keep=frozenset({"paddock-box:latest"}),
        grace=grace,
        now=world.clock,
    )


async def test_only_old_unclaimed_images_of_this_instance_go(world: World) -> None:
    rt = world.runtime
    box = await world.boxes.create("b", None, None, None)
    kept = await world.services.snapshots.take("b", "kept")
    ours = {LABEL_INSTANCE: "test"}
    images = {
        "orphan": "paddock-snapshots/gone:1",  # its fork was killed before its row
        "fresh": "paddock-snapshots/gone:2",  # committed a moment ago
        "other": "paddock-snapshots/theirs:1",  # another paddockd on this engine
        "base": "paddock-box:latest",  # labelled as ours by accident: still never removed
        "user": "someones/image:1",  # not a snapshot of ours
    }
    for ref in images.values():
        rt.images.add(ref)
        rt.labels[ref] = ours
    rt.labels[images["other"]] = {LABEL_INSTANCE: "another"}
    rt.created[images["fresh"]] = world.clock().timestamp() - 60
    committing = "paddock-snapshots/gone:3"  # its commit is under way
    rt.images.add(committing)
    rt.labels[committing] = ours
    world.reconciler.committing.add(committing)

    assert await sweeper(world).sweep() == [f"sha256:{images['orphan']}"]
    assert images["orphan"] not in rt.images
    assert {*images.values(), committing, kept.image} - {images["orphan"]} <= rt.images
    assert box.image in rt.images


async def test_a_snapshot_with_a_row_or_a_container_stays(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    snap = await world.services.snapshots.take("b", None)
    fork = await world.services.snapshots.fork("b", "f", None)
    assert await sweeper(world, grace=0).sweep() == []
    assert snap.image in world.runtime.images and fork.image in world.runtime.images
