"""Box identities: one slot per container, held while it is created, free again once runc
forgets the container or its creator died; never two containers on one range."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddockd.runtime.identity import RANGE, Identities, NoIdentity


def ids(tmp_path: Path, slots: int = 4) -> Identities:
    return Identities(tmp_path / "ids", tmp_path / "runc", first=0x70000000, slots=slots)


def known_to_runc(tmp_path: Path, cid: str) -> None:
    (tmp_path / "runc" / cid).mkdir(parents=True)
    (tmp_path / "runc" / cid / "state.json").write_text("{}")


def test_each_container_gets_a_range_of_its_own(tmp_path: Path) -> None:
    table = ids(tmp_path)
    with table.take("aaa") as first:
        known_to_runc(tmp_path, "aaa")
    with table.take("bbb") as second:
        known_to_runc(tmp_path, "bbb")
    assert first == 0x70000000 and second == first + RANGE
    assert table.of("aaa") == first and table.of("bbb") == second
    assert table.slot_of(second + 1000) == 1 and table.slot_of(200000) is None


def test_a_slot_being_created_is_not_taken_again(tmp_path: Path) -> None:
    table = ids(tmp_path)
    with table.take("aaa") as first, table.take("bbb") as second:
        # Neither is known to runc yet: the lock of the first one keeps it.
        assert first != second


def test_a_deleted_or_crashed_containers_slot_is_taken_again(tmp_path: Path) -> None:
    table = ids(tmp_path, slots=1)
    with table.take("aaa"):
        known_to_runc(tmp_path, "aaa")
    with pytest.raises(NoIdentity), table.take("bbb"):
        pass
    (tmp_path / "runc" / "aaa" / "state.json").unlink()  # runc deleted it
    with table.take("bbb") as again:
        pass  # bbb's create "crashed": nothing knows it, its lock is gone
    with table.take("ccc") as third:
        assert third == again == 0x70000000


def test_a_failed_create_gives_its_slot_back(tmp_path: Path) -> None:
    table = ids(tmp_path, slots=1)
    with pytest.raises(RuntimeError), table.take("aaa"):
        raise RuntimeError("runc failed")
    assert table.of("aaa") is None


def test_names_that_are_not_container_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError), ids(tmp_path).take("../x"):
        pass
