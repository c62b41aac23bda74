"""Choosing a box's host CPUs: ceil(cpus) of the least used, all when it wants as many."""

from __future__ import annotations

import time

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


ONE = 1_000_000_000  # one CPU, in the engine's NanoCpus
HOST = {0, 1, 2, 3}


def placements(engine: dict[str, set[int]], asked: list[str] | None = None) -> cpuset.Placements:
    """Placements on a four-CPU host over a fake engine (container id -> its cpuset)."""

    def cpuset_of(cid: str) -> set[int] | None:
        if asked is not None:
            asked.append(cid)
        return engine.get(cid)

    return cpuset.Placements(cpuset_of, host=lambda: HOST)


def nothing(_: set[int]) -> None:
    pass


def test_placed_boxes_spread_and_a_removed_one_frees_its_cpus() -> None:
    places = placements({})
    kept: list[set[int]] = []
    chosen = [places.place(f"c{i}", ONE, kept.append) for i in range(4)]
    assert kept == chosen == [{0}, {1}, {2}, {3}]
    places.unplace("c2")
    assert places.place("new", ONE, nothing) == {2}


def test_a_new_box_is_chosen_for_without_being_recorded() -> None:
    places = placements({})
    assert places.place("", ONE, nothing) == places.place("", ONE, nothing) == {0}


def test_a_listing_drops_boxes_gone_on_their_own_but_not_one_placed_since() -> None:
    places = placements({})
    assert places.place("a", ONE, nothing) == {0}
    began = time.monotonic()  # a listing begins; it finds nothing running ...
    assert places.place("b", ONE, nothing) == {1}  # ... while b starts
    places.running(set(), began)
    assert places.place("c", ONE, nothing) == {0}  # a stopped on its own: CPU 0 is free
    assert places.place("d", ONE, nothing) == {2}  # b's CPU still counts


def test_a_box_running_from_before_is_inspected_once_and_weighs() -> None:
    asked: list[str] = []
    places = placements({"old": {0, 1}}, asked)
    places.running({"old", "vanished"}, time.monotonic())
    assert places.place("new", 2 * ONE, nothing) == {2, 3}
    assert places.place("newer", ONE, nothing) == {0}
    assert sorted(asked) == ["old", "vanished"]  # once each; the vanished one is skipped


def test_a_box_placed_before_a_listing_and_started_after_it_still_counts() -> None:
    places = placements({})
    assert places.place("a", ONE, nothing) == {0}
    began = time.monotonic()  # a listing begins while a's start is under way ...
    places.started("a")  # ... and a's start returns after it: the listing missed it
    places.running(set(), began)
    assert places.place("b", ONE, nothing) == {1}  # a's CPU still counts
