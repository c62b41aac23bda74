"""Box lifecycle on the fake engine: capacity, snapshots, TTL, repair, cleanup."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from paddockd.domain.box import BoxState, Desired
from paddockd.domain.errors import (
    CapacityExceeded,
    Conflict,
    EngineUnavailable,
    InvalidRequest,
    InvalidState,
    NotFound,
    PaddockError,
    StorageLow,
)
from paddockd.domain.network import policy
from paddockd.runtime.base import LABEL_INSTANCE, ContainerSpec
from paddockd.services.activity import Activity

from ..conftest import World

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_create_starts_a_container_with_the_type_limits(world: World) -> None:
    box = await world.boxes.create("web", "small", 600, None)
    assert box.state == BoxState.RUNNING and box.name == "web"
    c = world.runtime.by_id[box.container_id or ""]
    spec: ContainerSpec = c["spec"]
    assert c["running"] and spec.cpus == 1.0 and spec.memory_mb == 1024
    assert spec.disk_mb == 10240 and box.disk_mb == 10240  # kept on the row, for resumes
    assert c["labels"][LABEL_INSTANCE] == "test"
    assert box.expires_at is not None and (box.expires_at - box.created_at).total_seconds() == 600


async def test_a_nearly_full_engine_disk_refuses_a_box_and_keeps_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Full:
        f_bavail, f_frsize = 100, 1 << 20  # 100 MiB

    monkeypatch.setattr("paddockd.services.capacity.os.statvfs", lambda _: Full)
    with pytest.raises(StorageLow, match="100 MiB free") as refused:
        await world.boxes.create("web", None, None, None)
    assert refused.value.details == {"free_mb": 100, "min_free_mb": 2048}
    assert await world.repo.all() == [] and world.runtime.by_id == {}


async def test_a_box_starting_forgets_its_addresss_old_connections(world: World) -> None:
    box = await world.boxes.create("a", None, None, None)
    info = await world.runtime.inspect(box.container_id or "")
    assert info is not None and world.network.forgotten == [info.ip]
    await world.boxes.stop("a")
    await world.reconciler.reconcile_all()
    assert len(world.network.forgotten) == 1  # only when it starts, not on every pass
    await world.boxes.resume("a")
    assert len(world.network.forgotten) == 2


async def test_generated_names_are_valid_and_unique(world: World) -> None:
    a = await world.boxes.create(None, None, None, None)
    b = await world.boxes.create(None, None, None, None)
    assert a.name != b.name


async def test_bad_input_creates_nothing(world: World) -> None:
    with pytest.raises(NotFound, match="unknown box type 'huge'"):
        await world.boxes.create(None, "huge", None, None)
    with pytest.raises(InvalidRequest):
        await world.boxes.create("Bad_Name", None, None, None)
    with pytest.raises(InvalidRequest):
        await world.boxes.create(None, None, -5, None)
    await world.boxes.create("dup", None, None, None)
    with pytest.raises(Conflict):
        await world.boxes.create("dup", None, None, None)
    assert len(world.runtime.by_id) == 1


async def test_capacity_refusal_is_clear_and_leaves_nothing(world: World) -> None:
    await world.boxes.create("one", "small", None, None)
    await world.boxes.create("two", "small", None, None)
    before = dict(world.runtime.by_id)
    with pytest.raises(CapacityExceeded, match="server is full"):
        await world.boxes.create("three", "medium", None, None)
    assert world.runtime.by_id == before
    assert [b.name for b in await world.boxes.all()] == ["one", "two"]


async def test_stopped_boxes_free_capacity_and_resume_rechecks(world: World) -> None:
    await world.boxes.create("one", "small", None, None)
    await world.boxes.create("two", "small", None, None)
    await world.boxes.stop("one")
    await world.boxes.create("three", "small", None, None)
    await world.boxes.create("four", "small", None, None)
    with pytest.raises(CapacityExceeded):
        await world.boxes.resume("one")


async def test_engine_failure_on_create_leaves_no_half_made_box(world: World) -> None:
    world.runtime.fail_next["start"] = EngineUnavailable("engine down")
    with pytest.raises(EngineUnavailable):
        await world.boxes.create("half", None, None, None)
    await world.reconciler.drain()
    assert await world.boxes.all() == []
    assert world.runtime.by_id == {}


async def test_a_box_whose_stop_failed_is_a_problem_in_status(world: World) -> None:
    """A box in error is counted neither running nor stopped: status names it, and a
    snapshot of it says what is wrong, not "try again in a moment"."""
    await world.boxes.create("full", None, None, None)
    world.runtime.fail_next["commit"] = InvalidState("the box's disk is full")
    with contextlib.suppress(PaddockError):
        await world.boxes.stop("full")
    box = await world.boxes.resolve("full")
    assert box.state == BoxState.ERROR
    problems = (await world.services.system.status()).problems
    assert any(p.startswith("box full: in error (") and "disk is full" in p for p in problems)
    with pytest.raises(InvalidState, match="in error"):
        await world.services.snapshots.take("full", None)


async def test_stop_snapshots_and_resume_restarts_the_same_container(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    stopped = await world.boxes.stop("b")
    assert stopped.state == BoxState.STOPPED
    assert "paddock-snapshots/" + box.id + ":1" in world.runtime.images
    resumed = await world.boxes.resume("b")
    assert resumed.state == BoxState.RUNNING and resumed.container_id == box.container_id


async def test_reconcile_recreates_a_lost_container_from_its_snapshot(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    await world.boxes.stop("b")
    await world.boxes.resume("b")
    await world.runtime.remove(box.container_id or "")
    repaired = await world.reconciler.reconcile(box.id)
    assert repaired is not None and repaired.state == BoxState.RUNNING
    spec: ContainerSpec = world.runtime.by_id[repaired.container_id or ""]["spec"]
    assert spec.image == f"paddock-snapshots/{box.id}:1"
    assert repaired.message and "recreated" in repaired.message


async def test_a_container_made_before_a_crash_but_never_recorded_is_replaced(
    world: World,
) -> None:
    box = await world.boxes.create("b", None, None, None)
    # What paddockd killed between the engine's create and the row's update leaves.
    await world.repo.update(box, container_id=None, state=BoxState.CREATING)
    world.runtime.by_id[box.container_id or ""]["running"] = False
    repaired = await world.reconciler.reconcile(box.id)
    assert repaired is not None and repaired.state == BoxState.RUNNING
    assert list(world.runtime.by_id) == [repaired.container_id]


async def test_reconcile_restarts_a_box_whose_container_stopped(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    world.runtime.by_id[box.container_id or ""]["running"] = False
    await world.reconciler.reconcile_all()
    assert world.runtime.by_id[box.container_id or ""]["running"]
    await world.reconciler.reconcile_all()  # idempotent
    assert len(world.runtime.by_id) == 1


async def test_orphans_of_this_instance_are_removed_others_left_alone(world: World) -> None:
    await world.runtime.create(
        ContainerSpec(
            "gone",
            "x",
            "paddock-box:latest",
            1,
            1,
            1,
            world.cfg.boxes_dir,
            labels={LABEL_INSTANCE: "test"},
        )
    )
    await world.runtime.create(
        ContainerSpec(
            "theirs",
            "y",
            "paddock-box:latest",
            1,
            1,
            1,
            world.cfg.boxes_dir,
            labels={LABEL_INSTANCE: "someone-else"},
        )
    )
    await world.reconciler.reconcile_all()
    assert [c["labels"][LABEL_INSTANCE] for c in world.runtime.by_id.values()] == ["someone-else"]
    assert world.network.syncs >= 1


async def test_a_box_that_comes_changes_or_goes_syncs_its_own_rules_alone(world: World) -> None:
    """What one box does costs one box's rules; only the periodic pass syncs them all."""
    net = world.network

    def held() -> dict[str, str]:
        return {b.box_id: b.policy.mode for b in net.enforced.values()}

    other = await world.boxes.create("other", None, None, None)
    await world.reconciler.reconcile_all()
    full = net.syncs - net.box_syncs
    box = await world.boxes.create("b", None, None, None)
    assert held() == {other.id: "allow-all", box.id: "allow-all"}
    await world.boxes.set_network("b", policy("deny-all"))
    assert held()[box.id] == "deny-all"
    await world.boxes.stop("b")
    assert held() == {other.id: "allow-all"}
    assert net.syncs - net.box_syncs == full  # not one full sync
    await world.reconciler.reconcile_all()
    assert net.syncs - net.box_syncs == full + 1
    # Where one box's alone cannot be done, the full sync does it.
    net.box_refuses = True
    await world.boxes.resume("b")
    assert net.syncs - net.box_syncs == full + 2
    assert held() == {other.id: "allow-all", box.id: "deny-all"}


async def test_delete_removes_container_snapshots_and_row(world: World) -> None:
    box = await world.boxes.create("b", None, None, None)
    await world.boxes.stop("b")
    await world.boxes.delete("b")
    await world.reconciler.drain()  # storage goes in the background
    assert world.runtime.by_id == {}
    assert not any(i.startswith("paddock-snapshots/") for i in world.runtime.images)
    with pytest.raises(NotFound):
        await world.boxes.resolve(box.id)


async def test_delete_lets_go_of_the_run_folder_of_a_container_removed_by_hand(
    world: World,
) -> None:
    box = await world.boxes.create("b", None, None, None)
    del world.runtime.by_id[box.container_id or ""]  # `docker rm -f` behind paddockd's back
    await world.boxes.delete("b", force=True)
    await world.reconciler.drain()
    assert world.runtime.released_run_folders == [world.reconciler.run_dir(box.id)]


async def test_delete_answers_before_the_engine_has_removed_the_container(world: World) -> None:
    """`rm` is done for its user at once: the name is free and the box out of the listing
    and of the network rules while the engine's removal finishes behind. A drive the box
    mounted goes only once its container has."""
    box = await world.boxes.create("b", None, None, None, drives=["data"])
    removing, go_on = asyncio.Event(), asyncio.Event()
    engine_remove = world.runtime.remove

    async def slow_remove(cid: str) -> None:
        removing.set()
        await go_on.wait()
        await engine_remove(cid)

    world.runtime.remove = slow_remove  # type: ignore[method-assign]
    await asyncio.wait_for(world.boxes.delete("b", force=True), 5)
    assert box.container_id in world.runtime.by_id  # still the engine's, for a moment
    assert [b.name for b in await world.boxes.listed()] == []
    await world.reconciler.sync_network()
    assert world.network.enforced == {}
    again = await world.boxes.create("b", None, None, None)
    assert again.id != box.id
    await removing.wait()
    drive_gone = asyncio.create_task(world.services.drives.remove("data"))
    await asyncio.sleep(0.05)
    assert not drive_gone.done()  # waits for the container that mounts it
    go_on.set()
    await drive_gone
    assert box.container_id not in world.runtime.by_id
    await world.reconciler.drain()
    assert await world.repo.get(box.id) is None


async def test_a_reconcile_pass_does_not_wait_for_a_removal_under_way(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    stuck = asyncio.Event()

    async def slow_remove(cid: str) -> None:
        await stuck.wait()

    world.runtime.remove = slow_remove  # type: ignore[method-assign]
    await world.boxes.delete("b", force=True)
    await asyncio.wait_for(world.reconciler.reconcile_all(), 5)
    stuck.set()
    await world.reconciler.drain()


async def test_a_drive_held_by_a_box_still_being_removed_is_refused_after_a_while(
    world: World,
) -> None:
    await world.boxes.create("b", None, None, None, drives=["data"])
    stuck = asyncio.Event()

    async def slow_remove(cid: str) -> None:
        await stuck.wait()

    world.runtime.remove = slow_remove  # type: ignore[method-assign]
    world.services.drives._deletions = lambda ids: world.reconciler.deletions(ids, 0.05)
    await world.boxes.delete("b", force=True)
    with pytest.raises(Conflict, match="still mounted by a box being deleted"):
        await world.services.drives.remove("data")
    stuck.set()
    await world.reconciler.drain()
    await world.services.drives.remove("data")  # gone with its box: free


async def test_delete_running_needs_force(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    with pytest.raises(InvalidState, match="--force"):
        await world.boxes.delete("b")
        await world.reconciler.drain()  # storage goes in the background
    await world.boxes.delete("b", force=True)
    await world.reconciler.drain()  # storage goes in the background


async def test_ttl_stop_keeps_a_snapshot_and_delete_removes(world: World) -> None:
    await world.boxes.create("keep", None, 10, "stop")
    await world.boxes.create("toss", None, 10, "delete")
    await world.boxes.create("later", None, 100, None)
    world.clock.advance(11)
    assert sorted(await world.reaper.reap()) == ["keep", "toss"]
    boxes = {b.name: b for b in await world.boxes.all()}
    assert boxes["keep"].state == BoxState.STOPPED and boxes["keep"].desired == Desired.STOPPED
    assert boxes["keep"].message == f"stopped by its TTL at {world.clock.now:%Y-%m-%d %H:%M:%S} UTC"
    assert "toss" not in boxes and boxes["later"].state == BoxState.RUNNING
    assert await world.reaper.reap() == []
    # The reason goes once the box runs again.
    assert (await world.boxes.resume("keep")).message is None


async def test_extend_moves_the_deadline_from_now(world: World) -> None:
    await world.boxes.create("b", None, 10, None)
    world.clock.advance(8)
    box = await world.boxes.extend("b", 60)
    assert box.expires_at == world.clock.now.replace() + (box.expires_at - world.clock.now)
    world.clock.advance(30)
    assert await world.reaper.reap() == []
    with pytest.raises(InvalidRequest):
        await world.boxes.extend("b", -1)


async def test_exec_on_a_stopped_box_says_how_to_resume(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    await world.boxes.stop("b")
    with pytest.raises(InvalidState, match="paddock resume b"):
        await world.boxes.exec("b", ["true"], {}, None, None)


async def test_exec_validates_env_user_and_defaults(world: World) -> None:
    await world.boxes.create("b", None, None, None)
    with pytest.raises(InvalidRequest):
        await world.boxes.exec("b", ["true"], {"BAD KEY": "1"}, None, None)
    with pytest.raises(InvalidRequest):
        await world.boxes.exec("b", ["true"], {}, None, "root;rm")
    await world.boxes.exec("b", ["true"], {}, "project", None)
    spec = world.runtime.execs[-1]
    assert spec.user == "abc" and spec.workdir == "/config/project"


async def test_resolve_by_id_prefix_and_ambiguity(world: World) -> None:
    a = await world.boxes.create("a", None, None, None)
    assert (await world.boxes.resolve(a.id[:6])).name == "a"
    with pytest.raises(NotFound):
        await world.boxes.resolve("zz")


async def test_a_reference_is_an_id_then_a_name_then_an_id_prefix(world: World) -> None:
    a = await world.boxes.create("a", None, None, None)
    b = await world.boxes.create("b", None, None, None)
    # Boxes made before names were checked may carry an id-like name: ids still win.
    await world.repo.update(b, name=a.id)
    assert (await world.boxes.resolve(a.id)).name == "a"
    assert (await world.boxes.resolve("a")).id == a.id
    # Only hex digits make a prefix: before, "___" became LIKE '%' and matched any box.
    for ref in ("___", "a%", "%"):
        with pytest.raises(NotFound):
            await world.boxes.resolve(ref)
    for name in (a.id, a.id[:6]):  # refused as id-like, or as starting with a digit
        with pytest.raises(InvalidRequest):
            await world.boxes.create(name, None, None, None)


async def test_network_policy_follows_the_box_and_changes_live(world: World) -> None:

    box = await world.boxes.create("n", None, None, None, network=policy("deny-all"))
    ip = (await world.runtime.inspect(box.container_id or "")).ip  # type: ignore[union-attr]
    assert {a: b.policy for a, b in world.network.enforced.items()} == {ip: policy("deny-all")}
    await world.boxes.set_network("n", policy("allowlist", ["198.18.0.0/15"]))
    assert world.network.enforced[ip].policy.allow == ("198.18.0.0/15",)
    fork = await world.services.snapshots.fork("n", "n2", None)
    assert fork.network == policy("allowlist", ["198.18.0.0/15"])
    await world.boxes.stop("n")
    assert ip not in world.network.enforced  # a stopped box has no address to police


async def test_a_stale_network_sync_never_overwrites_a_newer_policy(world: World) -> None:
    import asyncio

    box = await world.boxes.create("race", None, None, None)
    ip = (await world.runtime.inspect(box.container_id or "")).ip  # type: ignore[union-attr]
    real_sync = world.network.sync
    calls = 0

    async def slow_sync(pairs: list[object]) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(0.1)  # the periodic pass: read the state, then stalled
        return await real_sync(pairs)  # type: ignore[arg-type]

    world.network.sync = slow_sync  # type: ignore[method-assign]
    periodic = asyncio.create_task(world.reconciler.sync_network())
    await asyncio.sleep(0.01)
    await world.boxes.set_network("race", policy("deny-all"))
    await periodic
    assert world.network.enforced[ip].policy == policy("deny-all")


async def test_a_box_whose_isolation_fails_is_stopped_and_marked(world: World) -> None:
    """The network layer could not lock the box's bridge port to it: the box must not run
    (its traffic is dropped meanwhile); a later pass that succeeds starts it again."""
    box = await world.boxes.create("leaky", None, None, None)
    world.network.failing = {box.id: "no port"}
    await world.reconciler.sync_network()
    stopped = await world.boxes.resolve("leaky")
    assert stopped.state == BoxState.ERROR and "isolation" in (stopped.message or "")
    info = await world.runtime.inspect(box.container_id or "")
    assert info is not None and not info.running
    assert world.reconciler.isolation_failures == {box.id: "no port"}
    world.network.failing = {}
    await world.reconciler.reconcile(box.id)
    again = await world.boxes.resolve("leaky")
    assert again.state == BoxState.RUNNING and world.reconciler.isolation_failures == {}


async def test_a_box_being_deleted_is_not_marked_for_its_isolation(world: World) -> None:
    """A sync that lists a container being removed finds its port gone with it: that is
    no isolation failure to mark (the row stays `deleting`, and the delete finishes)."""
    box = await world.boxes.create("going", None, None, None)
    going = await world.repo.update(box, desired=Desired.DELETED, state=BoxState.DELETING)
    world.network.failing = {box.id: "0 ports"}
    await world.reconciler.sync_network()
    assert (await world.repo.get(box.id)) == going
    world.network.failing = {}
    await world.reconciler.reconcile(box.id)
    await world.reconciler.drain()
    assert await world.repo.get(box.id) is None


async def test_a_box_stopping_during_a_sync_keeps_one_snapshot(world: World) -> None:
    """A sync that listed the box while it ran finds its port gone once its stop is under
    way (seen in CI: the box marked `error` after its stop, then stopped again by the next
    pass with a second snapshot). Neither during the stop nor after it is that a failure."""
    box = await world.boxes.create("stopping", None, None, None)
    listed = await world.runtime.inspect(box.container_id or "")
    assert listed is not None
    stopping = asyncio.create_task(world.boxes.stop("stopping"))
    await asyncio.sleep(0)
    await world.reconciler._isolation_failed(box, listed, "0 ports")  # the stop holds the box
    await stopping
    await world.reconciler._isolation_failed(box, listed, "0 ports")  # and after it
    await world.reconciler.reconcile(box.id)
    after = await world.boxes.resolve("stopping")
    assert after.state == BoxState.STOPPED and after.message is None
    assert len(await world.repo.snapshots(box.id)) == 1


async def test_a_box_made_without_lxcfs_gets_its_views_when_resumed(world: World) -> None:
    """Binds are fixed at create: a stopped box whose container lacks the /proc views (or
    has them while LXCFS is down) is made again from its stop snapshot; a running one is
    only named in the problems, never restarted behind its user's back."""
    world.runtime.views = False
    box = await world.boxes.create("blind", None, None, None)
    world.runtime.views = True
    await world.reconciler.check_views()
    assert "started while LXCFS was down" in world.reconciler.view_problems[box.id]
    assert any(
        "blind: started while LXCFS" in p for p in (await world.services.system.status()).problems
    )
    await world.boxes.stop("blind")
    resumed = await world.boxes.resume("blind")
    assert resumed.container_id != box.container_id
    info = await world.runtime.inspect(resumed.container_id or "")
    assert info is not None and info.running and info.views
    assert world.runtime.by_id[resumed.container_id or ""]["spec"].image == resumed.current_snapshot
    await world.reconciler.check_views()
    assert world.reconciler.view_problems == {}
    # With nothing to change, resume restarts the same container.
    await world.boxes.stop("blind")
    again = await world.boxes.resume("blind")
    assert again.container_id == resumed.container_id


async def test_boxes_with_dead_views_and_a_down_lxcfs_are_reported(world: World) -> None:
    box = await world.boxes.create("stale", None, None, None)
    world.runtime.stale = {box.container_id or ""}
    await world.reconciler.check_views()
    assert "LXCFS restarted under it" in world.reconciler.view_problems[box.id]
    world.runtime.views = False
    problems = (await world.services.system.status()).problems
    assert any(p.startswith("LXCFS is not answering at /var/lib/lxcfs") for p in problems)


async def test_stats_give_figures_for_running_boxes_and_state_for_the_rest(world: World) -> None:
    await world.boxes.create("busy", "small", None, None)
    await world.boxes.create("idle", "small", None, None)
    await world.boxes.stop("idle")
    stats = {s.name: s for s in await world.services.stats.all()}
    busy, idle = stats["busy"], stats["idle"]
    assert (busy.state, busy.cpu_percent, busy.pids, busy.pids_limit) == ("running", 12.5, 9, 1024)
    # Its disk: what it wrote (4096) and its Docker volume's (1234), as the fake has them.
    assert busy.memory_limit_bytes == 1024 << 20 and busy.disk_bytes == 4096 + 1234
    assert busy.disk_quota_bytes is None
    assert idle.state == "stopped" and idle.cpu_percent is None and idle.memory_bytes is None
    assert (await world.services.stats.one("busy")) == busy
    status = await world.services.system.status()
    assert status.data_root_free_bytes and status.data_root_total_bytes


async def test_a_watcher_keeps_no_box_from_its_idle_stop(world: World) -> None:
    now = [1000.0]
    world.boxes.activity = Activity(now=lambda: now[0])
    await world.boxes.create("watched", None, 0, None, idle_stop=60)
    proc = await world.boxes.exec("watched", ["sleep", "100"], {}, None, None, busy=False)
    assert await world.reaper.reap() == []
    now[0] += 61
    assert await world.reaper.reap() == ["watched"]
    await proc.close()


async def test_idle_boxes_stop_and_boxes_in_use_do_not(world: World) -> None:
    now = [1000.0]
    world.boxes.activity = Activity(now=lambda: now[0])
    await world.boxes.create("idle", None, 0, None, idle_stop=60)
    await world.boxes.create("busy", None, 0, None, idle_stop=60)
    await world.boxes.create("never", None, 0, None)
    proc = await world.boxes.exec("busy", ["sleep", "100"], {}, None, None)
    assert await world.reaper.reap() == []  # the count starts when a box is first seen
    now[0] += 61
    assert await world.reaper.reap() == ["idle"]
    states = {b.name: b.state for b in await world.boxes.all()}
    assert states == {"idle": BoxState.STOPPED, "busy": BoxState.RUNNING, "never": BoxState.RUNNING}
    await proc.close()  # the exec ends: the count starts again from here
    now[0] += 59
    assert await world.reaper.reap() == []
    now[0] += 2
    assert await world.reaper.reap() == ["busy"]
    # An API call with wake=true starts a stopped box first.
    assert (await world.boxes.wake("idle")).state == BoxState.RUNNING
    for bad in (5, 31 * 86400):
        with pytest.raises(InvalidRequest, match="idle stop"):
            await world.boxes.create("bad", None, 0, None, idle_stop=bad)
