"""The owner's settings on production's wiring with fakes: checked as the file's values
are, kept over them across a restart, and followed by what starts from then on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from paddockd.config import Config, EngineConfig, PoolConfig
from paddockd.domain.errors import InvalidRequest, NotFound
from paddockd.netpolicy.fake import FakeNetwork
from paddockd.runtime.fake import FakeRuntime
from paddockd.store.settings import SettingsRepository
from paddockd.wiring import Wired, wire

from ..conftest import Clock, World

pytestmark = pytest.mark.anyio


def _wire(world: World) -> Wired:
    """paddockd started again on the same store and engine, from the same file."""
    return wire(world.cfg, runtime=world.runtime, network=world.network, now=Clock())


async def test_a_changed_default_is_followed_by_new_boxes_and_kept_over_a_restart(
    world: World,
) -> None:
    settings = world.services.settings
    changed = await settings.set("boxes.default_ttl", "2h")
    assert (changed.value, changed.file_value, changed.source) == (7200, 3600, "set")
    box = await world.boxes.create("a", None, None, None)
    assert box.ttl == 7200
    again = _wire(world)
    try:
        assert again.services.settings.get("boxes.default_ttl").value == 7200
        assert (await again.services.boxes.create("c", None, None, None)).ttl == 7200
    finally:
        again.db.close()
    reset = await settings.reset("boxes.default_ttl")
    assert (reset.value, reset.source) == (3600, "default")
    assert (await world.boxes.create("b", None, None, None)).ttl == 3600


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("boxes.default_ttl", "soon", "not a duration"),
        ("boxes.default_ttl", 40 * 86400, "longer than the maximum"),
        ("boxes.default_type", "huge", "not one of small, medium, large"),
        ("boxes.idle_stop", 5, "idle stop"),
        ("capacity.memory_overcommit", 500, "memory_overcommit"),
        ("capacity.memory_reserve_mb", -1, "whole number"),
        ("network.default_mode", "open", "not one of"),
        ("network.default_mode", "allowlist", "an allowlist needs entries"),
        ("pool.types", {"huge": 1}, "not a configured type"),
        ("types.xl", {"cpus": 0, "memory_mb": 1024, "pids": 64}, "cpus is 0.01 to 1024"),
        ("types.xl", {"cpus": 1, "memory_mb": 1024, "pids": 1e9}, "pids is 64 to"),
        ("types.xl", {"cpus": 1, "memory_mb": 1024, "pids": 1e30}, "pids: 1e+30 is not"),
        ("types.xl", '{"cpus": 1, "memory_mb": 1024, "pids": Infinity}', "pids: inf is not"),
        ("types.xl", '{"cpus": 2}', "a new type needs memory_mb, pids"),
        ("capacity.cpu_overcommit", "inf", "not a number this setting can take"),
        ("server.public_url", "http://[::1", "not a URL"),
        ("server.public_url", "ftp://example.com", "give http(s)"),
        ("types.xl", {"cpus": 2, "memory_mb": 1024, "pids": 64, "gpu": 1}, "unknown field"),
        ("server.public_url", "x" * 5000, "longer than"),
    ],
)
async def test_a_value_the_server_could_not_run_with_is_refused_and_nothing_changes(
    world: World, key: str, value: object, says: str
) -> None:
    settings = world.services.settings
    before = [(s.key, s.value, s.source) for s in settings.list()]
    with pytest.raises(InvalidRequest) as refused:
        await settings.set(key, value)
    assert says in refused.value.message
    assert [(s.key, s.value, s.source) for s in settings.list()] == before
    assert await SettingsRepository(world.db).all() == {}


async def test_an_unknown_key_is_not_found(world: World) -> None:
    for key in ("nope", "boxes.data_dir", "engine.socket", "types.Bad Name"):
        with pytest.raises(NotFound):
            await world.services.settings.set(key, "1")


async def test_a_new_type_is_a_type_until_reset_and_a_reset_others_rest_on_is_refused(
    world: World,
) -> None:
    settings = world.services.settings
    await settings.set("types.xl", '{"cpus": 2, "memory_mb": 2048, "pids": 512}')
    await settings.set("boxes.default_type", "xl")
    box = await world.boxes.create("big", None, None, None)
    assert box.type == "xl"
    with pytest.raises(InvalidRequest, match=r"boxes\.default_type rests on it"):
        await settings.reset("types.xl")
    await settings.reset("boxes.default_type")
    with pytest.raises(InvalidRequest, match="boxes have type xl"):
        await settings.reset("types.xl")  # the box `big` has it
    await world.boxes.delete("big", force=True)
    await world.reconciler.drain()
    await settings.reset("types.xl")
    assert "xl" not in world.boxes.types


async def test_a_stored_change_the_file_no_longer_allows_is_left_out_at_start(
    world: World,
) -> None:
    settings = world.services.settings
    await settings.set("types.xl", {"cpus": 2, "memory_mb": 2048, "pids": 512})
    await settings.set("boxes.default_type", "xl")
    await SettingsRepository(world.db).remove("types.xl")  # as if the store lost it
    again = _wire(world)
    try:
        view = again.services.settings.get("boxes.default_type")
        assert (view.value, again.services.boxes.types.keys() >= {"small"}) == ("small", True)
    finally:
        again.db.close()


async def test_capacity_changes_apply_to_the_next_admission(tmp_path: Path) -> None:
    cfg = replace(
        Config(),
        data_dir=tmp_path,
        instance="test",
        capacity_memory_mb=0,
        memory_overcommit=1.0,
        memory_reserve_mb=0,
        engine=replace(EngineConfig(), data_root=str(tmp_path)),
        pool=PoolConfig(max_boxes=0),
    )
    wired = wire(cfg, runtime=FakeRuntime(), network=FakeNetwork(), now=Clock())
    try:
        before = (await wired.services.system.status()).capacity.memory_total_mb
        await wired.services.settings.set("capacity.memory_overcommit", "2")
        after = (await wired.services.system.status()).capacity.memory_total_mb
        assert after == pytest.approx(2 * before, abs=2)
    finally:
        wired.db.close()


async def test_the_default_policy_changes_as_one_and_reaches_no_closed_range(world: World) -> None:
    settings = world.services.settings
    allowed = await settings.set("network.default_allow", "pypi.org,github.com")
    assert allowed.value == ["pypi.org", "github.com"]
    assert settings.get("network.default_mode").value == "allowlist"
    box = await world.boxes.create("listed", None, None, None)
    assert box.network.mode == "allowlist" and "pypi.org" in box.network.domains
    with pytest.raises(InvalidRequest, match="cannot be let in"):
        await settings.set("network.default_allow", "169.254.169.254")
    closed = await settings.set("network.default_mode", "deny-all")
    assert closed.value == "deny-all" and settings.get("network.default_allow").value == []


async def test_a_changed_type_keeps_what_the_change_leaves_out(world: World) -> None:
    settings = world.services.settings
    before = world.boxes.types["small"]
    await settings.set("types.small", {"cpus": 2})
    after = world.boxes.types["small"]
    assert (after.cpus, after.disk_mb, after.description) == (2, before.disk_mb, before.description)


async def test_changes_resting_on_others_come_back_after_a_restart_in_any_order(
    world: World,
) -> None:
    settings = world.services.settings
    await settings.set("types.big", {"cpus": 2, "memory_mb": 2048, "pids": 512})
    await settings.set("boxes.default_type", "big")
    await settings.set("types.big", {"cpus": 3})  # written after the default that names it
    await SettingsRepository(world.db).put("gone.key", 1)  # a key a newer Paddock had
    again = _wire(world)
    try:
        view = again.services.settings.get("boxes.default_type")
        assert (view.value, view.source) == ("big", "set")
        assert again.services.boxes.types["big"].cpus == 3
    finally:
        again.db.close()
