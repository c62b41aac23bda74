"""The capacity model: memory claims counted (overcommitted, after a reserve), CPU shared
unless a capacity is set, the host's available memory checked live; each refusal names
what ran out."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from paddockd.config import DEFAULT_TYPES, Config, load
from paddockd.domain.box import Box, BoxType
from paddockd.domain.errors import CapacityExceeded
from paddockd.services.capacity import START_MB, Capacity, host_memory_mb

from ..conftest import World

SMALL = DEFAULT_TYPES["small"]


def running(n: int, box_type: BoxType = SMALL) -> list[Box]:
    now = datetime.now(timezone.utc)
    return [Box.of_type(f"b{i}", f"b{i}", box_type, "img", now) for i in range(n)]


def test_by_default_cpu_is_shared_and_memory_claims_are_overcommitted() -> None:
    cap = Capacity.from_config(Config())
    assert cap.cpus is None and cap.overcommit == 4.0 and cap.reserve_mb == 1024
    assert cap.memory_mb == int((host_memory_mb() - 1024) * 4.0)
    # Far more small boxes than 4 x cores fit: CPU is not what refuses them.
    many = running(int(cap.memory_mb // SMALL.memory_mb) - 1)
    assert len(many) > 4 * 64 or cap.memory_mb < 300 * 1024
    Capacity(None, cap.memory_mb).check(many, SMALL)


def test_memory_claims_refuse_and_say_so() -> None:
    cap = Capacity(None, 4096, reserve_mb=1024, overcommit=4.0, available_mb=lambda: 10_000)
    cap.check(running(3), SMALL)
    with pytest.raises(CapacityExceeded, match="claims 1024 MiB of memory") as refused:
        cap.check(running(4), SMALL, lambda: "Stop b0.")
    assert refused.value.details["resource"] == "memory"
    assert refused.value.details["cpus_left"] is None  # JSON has no infinity
    assert "memory_overcommit" in refused.value.message and "Stop b0." in refused.value.message


def test_a_cpu_capacity_set_by_the_owner_is_counted() -> None:
    cfg = replace(Config(), cpu_overcommit=1.0)
    cap = Capacity.from_config(cfg)
    assert cap.cpus is not None and cap.cpus > 0
    tight = Capacity(2.0, 1 << 20)
    tight.check(running(1), SMALL)
    with pytest.raises(CapacityExceeded, match="needs 1 CPU") as refused:
        tight.check(running(2), SMALL)
    assert refused.value.details["resource"] == "cpu"


def test_the_hosts_available_memory_is_the_hard_limit() -> None:
    available = [1024 + START_MB + 1]
    cap = Capacity(None, 1 << 20, reserve_mb=1024, available_mb=lambda: available[0])
    cap.check([], SMALL)
    available[0] = 1024 + START_MB - 1
    with pytest.raises(CapacityExceeded, match="host is short of memory") as refused:
        cap.check([], SMALL)
    assert refused.value.details == {"resource": "host_memory", "available_mb": available[0]}
    # Memory set by hand: the owner decided; nothing is read from the host.
    assert Capacity.from_config(replace(Config(), capacity_memory_mb=2048)).reserve_mb == 0


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("memory_overcommit = 0", "memory_overcommit"),
        ("memory_overcommit = 1000", "memory_overcommit"),
        ("cpu_overcommit = -1", "cpu_overcommit"),
        ('memory_reserve_mb = "lots"', "memory_reserve_mb"),
    ],
)
def test_bad_capacity_settings_are_refused(tmp_path, line: str, why: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "paddockd.toml"
    path.write_text(f"[capacity]\n{line}\n")
    with pytest.raises(ValueError, match=why):
        load(path)


def test_capacity_settings_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "paddockd.toml"
    path.write_text("[capacity]\nmemory_overcommit = 2.5\ncpu_overcommit = 3\n")
    cfg = load(path)
    assert (cfg.memory_overcommit, cfg.cpu_overcommit) == (2.5, 3)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_refused_resume_names_your_running_boxes_and_no_other_type(world: World) -> None:
    world.boxes.capacity = replace(world.boxes.capacity, memory_mb=4608)
    await world.boxes.create("one", "small", None, None)
    await world.boxes.stop("one")
    await world.boxes.create("two", "medium", None, None)
    with pytest.raises(CapacityExceeded) as refused:
        await world.boxes.resume("one")
    message = refused.value.message
    assert "Stop one of your running boxes (two" in message and "--type" not in message
