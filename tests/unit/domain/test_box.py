"""Box names, TTLs and the desired-state transition table."""

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from paddockd.domain.box import Box, BoxState, Desired, TtlAction, validate_name, validate_ttl
from paddockd.domain.errors import InvalidRequest, InvalidState

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make(state: BoxState = BoxState.RUNNING, desired: Desired = Desired.RUNNING) -> Box:
    return Box(
        id="abc123",
        name="b1",
        type="small",
        image="img",
        state=state,
        desired=desired,
        created_at=NOW,
        ttl=60,
        ttl_action=TtlAction.STOP,
        cpus=1,
        memory_mb=1024,
        pids=100,
    )


@pytest.mark.parametrize("name", ["a", "web", "my-box-2", "x" * 40])
def test_good_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "current", "Web", "-x", "x-", "9lives", "a_b", "a/b", "..", "x" * 41, "a b", "é"]
)
def test_bad_names(name: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_name(name)


@pytest.mark.parametrize("name", ["cafe", "abc", "deadbeef0123", "a1b2c3d4e5f6", "f00d"])
def test_names_that_could_be_read_as_an_id_are_refused(name: str) -> None:
    # Ids (and prefixes of 3+) are lowercase hex: such a name would shadow another box.
    with pytest.raises(InvalidRequest, match="could be read as a box id"):
        validate_name(name)


@pytest.mark.parametrize("name", ["ab", "cafe-1", "deadbeefs", "g00d", "fab-web"])
def test_names_with_a_non_hex_character_or_too_short_for_a_prefix_are_fine(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize("ttl", [-1, 31 * 24 * 3600, 10**12])
def test_bad_ttls(ttl: int) -> None:
    with pytest.raises(InvalidRequest):
        validate_ttl(ttl)


def test_stop_running_then_resume_stopped() -> None:
    stopping = make().wants(Desired.STOPPED)
    assert stopping.desired == Desired.STOPPED
    resumed = replace(stopping, state=BoxState.STOPPED).wants(Desired.RUNNING)
    assert resumed.desired == Desired.RUNNING


def test_asking_again_is_a_no_op() -> None:
    box = make()
    assert box.wants(Desired.RUNNING) is box
    stopped = make(BoxState.STOPPED, Desired.STOPPED)
    assert stopped.wants(Desired.STOPPED) is stopped


def test_resume_while_creating_is_refused_with_reason() -> None:
    with pytest.raises(InvalidState, match="being created"):
        make(BoxState.CREATING, Desired.STOPPED).wants(Desired.RUNNING)


def test_stop_while_stopping_is_refused() -> None:
    with pytest.raises(InvalidState, match="stopping"):
        make(BoxState.STOPPING, Desired.RUNNING).wants(Desired.STOPPED)


def test_delete_allowed_from_any_state_but_deleting() -> None:
    for state in BoxState:
        if state is BoxState.DELETING:
            with pytest.raises(InvalidState):
                make(state).wants(Desired.DELETED)
        else:
            assert make(state).wants(Desired.DELETED).desired == Desired.DELETED


def test_deadline() -> None:
    assert make().deadline_from(NOW) == datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)
    assert replace(make(), ttl=0).deadline_from(NOW) is None
