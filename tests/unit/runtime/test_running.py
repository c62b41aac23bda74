"""The running box containers as paddockd last saw them: what it starts, stops and
inspects keeps the view current between the engine's listings, a listing never undoes what
changed while it was taken, and an address belongs to one container only."""

from __future__ import annotations

from paddockd.runtime.base import ContainerInfo
from paddockd.runtime.running import RunningContainers

MINE = {"paddock.instance": "default"}


def info(cid: str, ip: str, running: bool = True, labels: dict[str, str] = MINE) -> ContainerInfo:
    return ContainerInfo(
        cid, "box-" + cid, running, "running" if running else "exited", ip=ip, labels=labels
    )


def ids(view: RunningContainers) -> list[str]:
    return sorted(i.id for i in view.matching(MINE))


def test_a_listing_is_taken_first_and_then_every_so_often() -> None:
    view = RunningContainers(every=10)
    assert view.listing_due(0)
    view.listing()
    view.listed([info("a", "10.0.0.2"), info("b", "10.0.0.3", running=False)], now=100)
    assert ids(view) == ["a"] and not view.listing_due(105) and view.listing_due(110)


def test_what_paddockd_starts_stops_and_inspects_is_current_without_a_listing() -> None:
    view = RunningContainers(every=10)
    view.listing()
    view.listed([info("a", "10.0.0.2")], now=0)
    view.started("b")
    assert view.unseen() == ["b"]  # its address is known once it is inspected
    view.seen(info("b", "10.0.0.3"))
    assert view.unseen() == [] and ids(view) == ["a", "b"]
    view.gone("a")
    assert ids(view) == ["b"]
    view.seen(info("b", "10.0.0.3", running=False))  # stopped behind paddockd's back
    assert ids(view) == []


def test_changes_made_while_a_listing_is_taken_outrank_it() -> None:
    view = RunningContainers(every=10)
    view.listing()
    view.listed([info("a", "10.0.0.2")], now=0)
    view.listing()  # the engine is listed ...
    view.started("b")  # ... while a box starts
    view.seen(info("b", "10.0.0.3"))
    view.gone("a")  # and another is stopped
    view.listed([info("a", "10.0.0.2")], now=20)  # the listing saw the old state
    assert ids(view) == ["b"] and view.unseen() == []


def test_an_address_given_again_belongs_to_the_container_seen_with_it_last() -> None:
    view = RunningContainers(every=10)
    view.listing()
    view.listed([info("a", "10.0.0.2")], now=0)
    # a's init exited on its own; the engine gave its address to a box started since.
    view.started("b")
    view.seen(info("b", "10.0.0.2"))
    assert [(i.id, i.ip) for i in view.matching(MINE)] == [("b", "10.0.0.2")]
    # A listing that still had a (taken before a was gone) does not bring it back over b.
    view.listing()
    view.seen(info("b", "10.0.0.2"))
    view.listed([info("a", "10.0.0.2"), info("b", "10.0.0.2")], now=20)
    assert [(i.id, i.ip) for i in view.matching(MINE)] == [("b", "10.0.0.2")]


def test_a_failed_listing_changes_nothing_and_another_is_due() -> None:
    view = RunningContainers(every=10)
    view.listing()
    view.listed([info("a", "10.0.0.2")], now=0)
    assert view.listing_due(10)
    view.listing()
    view.listing_failed()
    assert ids(view) == ["a"] and view.listing_due(10)


def test_only_the_asked_labels() -> None:
    view = RunningContainers(every=10)
    view.listing()
    view.listed([info("a", "10.0.0.2"), info("o", "10.1.0.2", labels={"paddock.instance": "x"})], 0)
    assert ids(view) == ["a"]
