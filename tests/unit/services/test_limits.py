"""Members' limits: a refusal names the limit; what a member already runs is counted."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from paddockd.domain.accounts import Limits
from paddockd.domain.box import Box, BoxState, BoxType, Desired, TtlAction
from paddockd.domain.errors import CapacityExceeded, InvalidRequest
from paddockd.services.capacity import check_limits

SMALL = BoxType("small", 1.0, 1024, 512)


def _box(n: int, desired: Desired = Desired.RUNNING) -> Box:
    return Box(
        id=f"b{n}",
        name=f"box{n}",
        type="small",
        image="img",
        state=BoxState.RUNNING,
        desired=desired,
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        ttl=0,
        ttl_action=TtlAction.STOP,
        cpus=1.0,
        memory_mb=1024,
        pids=512,
    )


def test_box_count_counts_stopped_boxes_and_applies_to_new_ones_only() -> None:
    own = [_box(1), _box(2, Desired.STOPPED)]
    with pytest.raises(CapacityExceeded, match="limit is 2 box") as err:
        check_limits(Limits(max_boxes=2), own, SMALL, new=True)
    assert err.value.details == {"limit": "max_boxes", "value": 2}
    check_limits(Limits(max_boxes=2), own, SMALL, new=False)  # a resume adds no box


def test_cpu_and_memory_count_running_boxes() -> None:
    own = [_box(1), _box(2, Desired.STOPPED)]
    check_limits(Limits(max_cpus=2, max_memory_mb=2048), own, SMALL, new=True)
    with pytest.raises(CapacityExceeded, match=r"limit is 1\.5 CPU"):
        check_limits(Limits(max_cpus=1.5), own, SMALL, new=False)
    with pytest.raises(CapacityExceeded, match="limit is 1536 MiB") as err:
        check_limits(Limits(max_memory_mb=1536), own, SMALL, new=True)
    assert err.value.details["limit"] == "max_memory_mb"


@pytest.mark.parametrize("bad", [{"max_boxes": 0}, {"max_cpus": -1.0}, {"max_memory_mb": 0}])
def test_limits_are_positive_or_none(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidRequest, match="positive"):
        Limits(**bad)  # type: ignore[arg-type]
