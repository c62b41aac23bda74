"""The warm pool on production's wiring with fakes: claims, capacity, refill, adoption."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from paddockd import config
from paddockd.config import Config, EngineConfig, PoolConfig
from paddockd.domain.box import BoxState, BoxType
from paddockd.domain.errors import CapacityExceeded, PaddockError
from paddockd.domain.network import policy
from paddockd.netpolicy.fake import FakeNetwork
from paddockd.runtime.base import LABEL_BOX, LABEL_INSTANCE, LABEL_NAME, LABEL_POOL, ContainerSpec
from paddockd.runtime.fake import FakeRuntime
from paddockd.services.reconciler import docker_volume
from paddockd.services.templates import Given
from paddockd.wiring import wire

from ..conftest import Clock

pytestmark = pytest.mark.anyio


class Pool:
    """A server's wiring with a warm pool, on fakes; `restart` wires it again on the same
    store and engine, as a paddockd that starts does."""

    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        self.tmp_path = tmp_path
        self.runtime, self.network = FakeRuntime(), FakeNetwork()
        self.cfg = self.config(**settings)
        self.wired = wire(self.cfg, runtime=self.runtime, network=self.network, now=Clock())

    def config(
        self,
        types: dict[str, int] | None = None,
        max_boxes: int = 4,
        redefined: BoxType | None = None,
        cpus: float = 8,
        memory_mb: int = 8192,
        templates: dict[str, int] | None = None,
    ) -> Config:
        box_types = {**config.DEFAULT_TYPES, **({redefined.name: redefined} if redefined else {})}
        return replace(
            Config(),
            data_dir=self.tmp_path,
            instance="test",
            capacity_cpus=cpus,
            capacity_memory_mb=memory_mb,
            types=box_types,
            engine=replace(EngineConfig(), data_root=str(self.tmp_path)),
            pool=PoolConfig(
                types=types, max_boxes=max_boxes, refill_delay=0, templates=templates or {}
            ),
        )

    def restart(self, **settings: Any) -> None:
        self.wired.db.close()
        self.cfg = self.config(**settings)
        self.wired = wire(self.cfg, runtime=self.runtime, network=self.network, now=Clock())

    @property
    def boxes(self) -> Any:
        return self.wired.services.boxes

    async def fill(self) -> None:
        """A round of the pool's loop, removals included (they run in the background)."""
        await self.wired.pool.fill()
        await self.wired.pool.drain()

    def ready(self) -> dict[str, int]:
        status = self.wired.pool.status()
        return {t.type: t.ready for t in status.types}

    async def unclaimed(self) -> list[str]:
        """Box ids of the engine's containers that the pool made and no claim took."""
        rows = {b.id for b in await self.wired.repo.all()}
        made = [c["labels"] for c in self.runtime.by_id.values() if c["labels"].get(LABEL_POOL)]
        return [labels[LABEL_BOX] for labels in made if labels[LABEL_BOX] not in rows]

    def container(self, cid: str | None) -> dict[str, Any]:
        return self.runtime.by_id[cid or ""]


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    made = Pool(tmp_path)
    yield made
    made.wired.db.close()


async def test_the_pool_fills_with_boxes_nobody_sees_that_hold_capacity(pool: Pool) -> None:
    await pool.fill()
    assert pool.ready() == {"small": 2}
    assert await pool.boxes.listed() == [] and await pool.wired.repo.all() == []
    assert len(await pool.unclaimed()) == 2
    # No network until claimed: nothing is enforced for them, so the guard drops it all.
    await pool.wired.reconciler.sync_network()
    assert pool.network.enforced == {}
    status = await pool.wired.services.system.status()
    assert status.pool is not None and (status.pool.cpus, status.pool.memory_mb) == (2, 2048)
    assert status.capacity.cpus_used == 0  # boxes' use; the pool's is its own line
    for c in pool.runtime.by_id.values():
        assert c["running"] and LABEL_NAME not in c["labels"]
        assert c["spec"].hostname == c["labels"][LABEL_BOX]  # named by its id until claimed
    await pool.fill()
    assert len(pool.runtime.by_id) == 2  # full: a second round makes nothing


async def test_new_claims_a_ready_box_and_makes_it_the_boxs_own(pool: Pool) -> None:
    await pool.fill()
    ready = set(await pool.unclaimed())
    box = await pool.boxes.create("web", None, 600, None, network=policy("deny-all", ()))
    assert box.id in ready and box.state == BoxState.RUNNING and box.name == "web"
    c = pool.container(box.container_id)
    assert c["hostname"] == "web"  # renamed before `new` returned
    enforced = {b.box_id: b for b in pool.network.enforced.values()}
    assert enforced[box.id].policy.mode == "deny-all"  # its own policy, at once
    proc = await pool.boxes.exec("web", ["env"], {}, None, None)
    await proc.close()
    assert pool.runtime.execs[-1].env["PADDOCK_BOX"] == "web"
    assert [b.name for b in await pool.boxes.listed()] == ["web"]
    # The pool makes a fresh box in its place; the claimed one is never pooled again.
    await pool.fill()
    assert pool.ready() == {"small": 2}
    assert box.id not in await pool.unclaimed() and len(set(await pool.unclaimed()) - ready) == 1


async def test_a_claimed_box_is_renamed_again_after_every_start(pool: Pool) -> None:
    await pool.fill()
    box = await pool.boxes.create("web", None, 600, None)
    await pool.boxes.stop("web")
    await pool.boxes.resume("web")
    # The engine names a container as it was made at every start (the fake does too).
    assert pool.container(box.container_id)["hostname"] == "web"
    await pool.wired.reconciler.reconcile_all()
    assert pool.runtime.calls.count("set_hostname") == 2  # claim, resume; not every pass


async def test_what_a_pooled_box_does_not_fit_is_created_as_before(pool: Pool) -> None:
    await pool.fill()
    ready = set(await pool.unclaimed())
    with_drive = await pool.boxes.create("d", None, 600, None, drives=["cache"])
    medium = await pool.boxes.create("m", "medium", 600, None)
    assert with_drive.id not in ready and medium.id not in ready
    # A box's own containers blank the pool's label, which an image could pass on.
    assert pool.container(with_drive.container_id)["labels"][LABEL_POOL] == ""
    assert pool.ready() == {"small": 2}
    # A rebuilt image: the ready boxes run the old one.
    pool.runtime.image_ids["paddock-box:latest"] = "rebuilt"
    fresh = await pool.boxes.create("fresh", None, 600, None)
    assert fresh.id not in ready
    await pool.fill()  # replaces both with boxes of the new image
    assert pool.ready() == {"small": 2} and not set(await pool.unclaimed()) & ready
    claimed = await pool.boxes.create("new-image", None, 600, None)
    assert pool.container(claimed.container_id)["image_id"] == "sha256:rebuilt"


async def test_a_box_that_needs_the_room_takes_it_from_the_pool(tmp_path: Path) -> None:
    pool = Pool(tmp_path, types={"small": 3}, cpus=4, memory_mb=4096)
    await pool.fill()
    assert pool.ready() == {"small": 3}
    # A box with a drive cannot use a ready one; the room is still there for it.
    await pool.boxes.create("a", None, 600, None, drives=["x"])
    assert pool.ready() == {"small": 3}
    # The next needs one box's room: exactly one ready box goes.
    await pool.boxes.create("b", None, 600, None, drives=["x:ro"])
    await pool.wired.pool.drain()
    assert pool.ready() == {"small": 2} and len(await pool.unclaimed()) == 2
    held = pool.wired.pool.held()
    rows = await pool.wired.repo.all()
    assert pool.boxes.capacity.left(rows, held) == (0, 0)
    # One the server cannot hold at all is refused, and takes nothing.
    with pytest.raises(CapacityExceeded):
        await pool.boxes.create("c", "medium", 600, None)
    assert pool.ready() == {"small": 2}
    # Freed room refills it, never past the capacity.
    await pool.boxes.delete("a", force=True)
    await pool.fill()
    assert pool.ready() == {"small": 3}
    await pool.fill()
    assert len(await pool.unclaimed()) == 3
    pool.wired.db.close()


async def test_a_box_being_made_gives_its_room_back(tmp_path: Path) -> None:
    pool = Pool(tmp_path, types={"small": 1}, cpus=1, memory_mb=1024)
    made = asyncio.Event()
    create = pool.runtime.create

    async def slow_for_the_pool(spec: ContainerSpec) -> str:
        if spec.labels.get(LABEL_POOL):
            await made.wait()
        return await create(spec)

    pool.runtime.create = slow_for_the_pool  # type: ignore[method-assign]
    filling = asyncio.create_task(pool.fill())
    await asyncio.sleep(0.05)
    assert pool.wired.pool.status().types[0].making == 1  # reserved, being made
    await pool.boxes.create("a", None, 600, None, drives=["x"])  # needs that room
    assert pool.wired.pool.held() == (0, 0)
    made.set()
    await filling
    await pool.wired.pool.drain()
    assert pool.ready() == {"small": 0} and await pool.unclaimed() == []
    assert pool.wired.pool.status().note == "the server has no room for more ready boxes"
    pool.wired.db.close()


async def test_a_resume_takes_the_room_too(tmp_path: Path) -> None:
    pool = Pool(tmp_path, types={"small": 2}, cpus=2, memory_mb=2048)
    await pool.wired.services.boxes.create("a", None, 600, None)
    await pool.boxes.stop("a")
    await pool.fill()
    assert pool.ready() == {"small": 2}
    await pool.boxes.resume("a")
    await pool.wired.pool.drain()
    assert pool.ready() == {"small": 1} and len(await pool.unclaimed()) == 1
    pool.wired.db.close()


async def test_parallel_news_get_distinct_boxes(pool: Pool) -> None:
    await pool.fill()
    ready = set(await pool.unclaimed())
    made = await asyncio.gather(*(pool.boxes.create(f"p{i}", None, 600, None) for i in range(6)))
    assert len({b.id for b in made}) == 6 and len({b.container_id for b in made}) == 6
    assert len({b.id for b in made} & ready) == 2
    for b in made:
        assert pool.container(b.container_id)["hostname"] == b.name


async def test_the_pool_waits_for_users_requests(pool: Pool) -> None:
    async with pool.wired.pool.user_work():
        filling = asyncio.create_task(pool.fill())
        await asyncio.sleep(0.3)
        assert pool.runtime.by_id == {}
    await asyncio.wait_for(filling, 5)
    assert pool.ready() == {"small": 2}


async def test_a_restart_adopts_what_fits_and_removes_the_rest(pool: Pool) -> None:
    await pool.fill()
    claimed = await pool.boxes.create("web", None, 600, None)
    await pool.fill()
    ready = sorted(await pool.unclaimed())
    assert len(ready) == 2
    pool.restart()
    await pool.wired.reconciler.reconcile_all()
    assert sorted(await pool.unclaimed()) == ready  # the reconciler leaves them to the pool
    await pool.wired.pool.adopt()
    assert pool.ready() == {"small": 2}
    await pool.fill()
    assert sorted(await pool.unclaimed()) == ready  # adopted, none made again
    assert pool.container(claimed.container_id)["running"]  # a box now: not the pool's
    # A smaller pool keeps what it needs and removes the rest, with its storage.
    pool.restart(types={"small": 1})
    await pool.wired.pool.adopt()
    await pool.wired.pool.drain()
    assert len(await pool.unclaimed()) == 1 and pool.ready() == {"small": 1}
    kept = (await pool.unclaimed())[0]
    gone = next(i for i in ready if i != kept)
    assert not (pool.tmp_path / "boxes" / gone).exists()
    # Redefined limits: a ready box of the old ones no longer fits.
    await pool.runtime.create_volume(docker_volume(kept), {})
    pool.restart(types={"small": 1}, redefined=BoxType("small", 2.0, 1024, 1024))
    await pool.wired.pool.adopt()
    await pool.wired.pool.drain()
    assert await pool.unclaimed() == [] and pool.ready() == {"small": 0}
    assert docker_volume(kept) not in pool.runtime.volume_by_name
    await pool.fill()
    [made] = await pool.unclaimed()
    [spec] = [c["spec"] for c in pool.runtime.by_id.values() if c["spec"].box_id == made]
    assert spec.cpus == 2.0


async def test_a_stopped_pooled_box_is_not_adopted(pool: Pool) -> None:
    await pool.fill()
    for c in pool.runtime.by_id.values():
        c["running"] = False  # the engine restarted
    pool.restart()
    await pool.wired.pool.adopt()
    await pool.wired.pool.drain()
    assert pool.runtime.by_id == {}


async def test_the_pool_is_off_with_no_sizes(tmp_path: Path) -> None:
    pool = Pool(tmp_path, max_boxes=0)
    await pool.fill()
    assert pool.runtime.by_id == {} and pool.wired.pool.status().max_boxes == 0
    pool.wired.db.close()


def test_pool_settings(tmp_path: Path) -> None:
    path = tmp_path / "paddockd.toml"
    path.write_text("")
    assert config.load(path).pool_sizes == {"small": 2}
    path.write_text('[boxes]\ndefault_type = "medium"\n')
    assert config.load(path).pool_sizes == {"medium": 2}
    path.write_text("[pool]\nmax_boxes = 6\ntypes = { large = 1, small = 0 }\n")
    assert config.load(path).pool_sizes == {"large": 1}
    path.write_text("[pool]\nmax_boxes = 0\n")
    assert config.load(path).pool_sizes == {}
    path.write_text("[pool]\ntypes = { huge = 1 }\n")
    with pytest.raises(ValueError, match="'huge' is not a configured type"):
        config.load(path)
    path.write_text("[pool]\nsize = 1\n")
    with pytest.raises(ValueError, match="unknown setting"):
        config.load(path)


async def test_a_removal_the_engine_missed_is_done_on_a_later_round(pool: Pool) -> None:
    await pool.fill()
    ready = set(await pool.unclaimed())
    for c in pool.runtime.by_id.values():
        c["running"] = False  # the engine restarted under the pool
    pool.runtime.fail_next["remove"] = PaddockError("the box engine is not answering")
    await pool.fill()  # drops them; one removal fails, as it did with the engine away
    left = set(await pool.unclaimed()) & ready
    assert left, "the engine refused a removal: a container of the old ones is left"
    await pool.fill()
    assert not set(await pool.unclaimed()) & ready  # gone now
    assert pool.ready() == {"small": 2}


async def test_the_pool_keeps_boxes_of_a_template_with_its_files(tmp_path: Path) -> None:
    pool = Pool(tmp_path, types={"small": 1}, templates={"tools": 1})
    pool.runtime.copies = True  # templates are disk copies (reflinks on a real engine)
    await pool.fill()
    status = pool.wired.pool.status()
    assert pool.ready() == {"small": 1} and "template tools" in (status.note or "")
    # The owner makes the template; the pool then keeps a box of it, of a copy of its disk.
    await pool.boxes.create("prepared", None, None, None)
    templates = pool.wired.services.templates
    made = await templates.from_box("tools", "prepared", None, Given(start_cmd="make serve"))
    await pool.fill()
    assert pool.ready() == {"small": 1, "template:tools": 1}
    [waiting] = [
        c for c in pool.runtime.by_id.values() if c["spec"].disk and c["labels"].get(LABEL_POOL)
    ]
    assert waiting["spec"].disk == made.disk
    box = await pool.boxes.create("fromit", None, None, None, template="tools")
    assert pool.container(box.container_id) is waiting  # claimed, not made
    assert box.current_disk  # its own copy of the template's disk, as a box of it has
    await pool.wired.reconciler.drain()  # the start command is started in the background
    assert any("make serve" in " ".join(e.cmd) for e in pool.runtime.execs)  # started
    plain = await pool.boxes.create("plain", None, None, None)
    assert pool.container(plain.container_id)["spec"].disk is None  # never a template's
    # The template made again: the ready box of the old one goes, one of the new comes.
    await pool.fill()
    await templates.delete("tools")
    again = await templates.from_box("tools", "prepared", None, Given())
    await pool.fill()
    disks = [
        c["spec"].disk
        for c in pool.runtime.by_id.values()
        if c["labels"].get(LABEL_POOL) and c["labels"][LABEL_BOX] in await pool.unclaimed()
    ]
    assert again.disk in disks and made.disk not in disks
    pool.wired.db.close()


async def test_the_owner_resizes_the_pool_while_it_runs(pool: Pool) -> None:
    await pool.fill()
    assert pool.ready() == {"small": 2}
    settings = pool.wired.services.settings
    await settings.set("pool.types", "small=1,medium=1")
    await pool.fill()
    assert pool.ready() == {"small": 1, "medium": 1}
    assert len(await pool.unclaimed()) == 2  # the surplus small one is gone from the engine
    await settings.set("pool.max_boxes", 0)
    await pool.fill()
    assert pool.ready() == {} and await pool.unclaimed() == []


async def test_a_users_request_wakes_the_pool_only_when_it_lacks_boxes(pool: Pool) -> None:
    """A full pool's round lists every container: after each user's create, at 500 boxes
    that listing was the engine's time the user's next command waited on."""
    await pool.fill()
    rounds = 0
    fill = pool.wired.pool.fill

    async def counted() -> None:
        nonlocal rounds
        rounds += 1
        await fill()

    pool.wired.pool.fill = counted  # type: ignore[method-assign]
    loop = asyncio.create_task(pool.wired.pool.run())
    try:
        await asyncio.sleep(0.2)
        assert rounds == 1  # its first round, after adopting
        async with pool.wired.pool.user_work():
            pass
        await asyncio.sleep(0.2)
        assert rounds == 1  # full: nothing to make
        await pool.boxes.create("taker", None, 600, None)  # claims a ready box
        await asyncio.sleep(0.2)
        assert rounds == 2 and pool.ready() == {"small": 2}
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await pool.wired.pool.drain()


async def test_a_volume_no_box_came_to_have_is_removed_and_one_being_made_is_not(
    pool: Pool,
) -> None:
    # A pooled make records the box's volume, then makes its container: a restart between
    # the two left the volume (a filesystem of the box's disk size) for good.
    await pool.fill()
    claimed = await pool.boxes.create("web", None, 600, None)
    lost, others = docker_volume("0123456789ab"), docker_volume("ba9876543210")
    await pool.runtime.create_volume(lost, {LABEL_INSTANCE: "test"})
    await pool.runtime.create_volume(others, {LABEL_INSTANCE: "another"})
    recorded, gate, real = asyncio.Event(), asyncio.Event(), pool.runtime.create
    made: list[str] = []

    async def slow(spec: ContainerSpec) -> str:
        for m in spec.mounts:  # recorded; the container waits
            await pool.runtime.create_volume(m.volume, {LABEL_INSTANCE: "test"}, m.size_mb)
            made.append(m.volume)
        recorded.set()
        await gate.wait()
        return await real(spec)

    pool.runtime.create = slow  # type: ignore[method-assign]
    filling = asyncio.create_task(pool.fill())  # the claimed box's replacement
    await asyncio.wait_for(recorded.wait(), 5)
    await pool.wired.reconciler.reconcile_all()
    assert made and made[0] in pool.runtime.volume_by_name  # its make is under way
    gate.set()
    await asyncio.wait_for(filling, 5)
    assert lost not in pool.runtime.volume_by_name
    kept = {docker_volume(b) for b in [claimed.id, *await pool.unclaimed()]} | {others}
    assert set(pool.runtime.volume_by_name) == kept


async def test_each_ready_box_is_warmed_for_its_claims_first_command(pool: Pool) -> None:
    await pool.fill()
    assert pool.runtime.calls.count("warm_exec") == 2  # each box made
    pool.restart()
    await pool.wired.pool.adopt()
    assert pool.runtime.calls.count("warm_exec") == 4  # and each adopted (a new agent)


async def test_a_claim_wakes_the_pool_only_once_the_users_work_is_done(pool: Pool) -> None:
    # A round asks the engine for every container (150 ms at 500 boxes): run beside a
    # claim, it slowed the claimed box's first command.
    await pool.fill()
    rounds: list[int] = []
    fill = pool.wired.pool.fill

    async def counted() -> None:
        rounds.append(pool.wired.pool._busy)
        await fill()

    pool.wired.pool.fill = counted  # type: ignore[method-assign]
    loop = asyncio.create_task(pool.wired.pool.run())
    try:
        await asyncio.sleep(0.2)
        rounds.clear()  # its first round, at its start
        async with pool.wired.pool.user_work():  # a create, then the box's first command
            await pool.boxes.create("web", None, 600, None)  # a claim: wakes the pool
            await asyncio.sleep(0.3)
            assert rounds == []
        await asyncio.sleep(0.3)
        assert rounds[:1] == [0]  # once the user's work was done
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
