"""Choosing a box's host CPUs: ceil(cpus) of the least used, all when it wants as many."""

from __future__ import annotations

from paddockd.runtime import cpuset


def test_parse_and_render_round_trip() -> None:
    assert cpuset.parse("0-2,5") == {0, 1, 2, 5}
    assert cpuset.parse("") == set()
    assert cpuset.render({5, 0, 1}) == "0,1,5"


def test_a_box_gets_ceil_of_its_cpus() -> None:
    assert len(cpuset.pick(1.0, range(8), [])) == 1
    assert len(cpuset.pick(1.5, range(8), [])) == 2
    assert len(cpuset.pick(0.25, range(8), [])) == 1


def test_boxes_spread_over_the_least_used_cpus() -> None:
    host = range(4)
    taken: list[set[int]] = []
    for _ in range(4):
        taken.append(cpuset.pick(1, host, taken))
    assert sorted(min(t) for t in taken) == [0, 1, 2, 3]
    # Loads 2, 1, 1, 0: the idle CPU, then the lower-numbered of the two used once.
    assert cpuset.pick(2, host, [{0, 1}, {0}, {2}]) == {3, 1}


def test_a_box_as_big_as_the_host_gets_all_of_it() -> None:
    assert cpuset.pick(4, [0, 1], [{0}]) == {0, 1}
    assert cpuset.pick(2, [0, 1], []) == {0, 1}
