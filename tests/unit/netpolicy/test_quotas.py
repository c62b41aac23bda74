"""Token buckets and slots: the arithmetic behind the DNS filter's per-box limits."""

from __future__ import annotations

from paddockd.netpolicy.quotas import Slots, TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_its_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=10, burst=3, clock=clock)
    assert [buckets.take("a") for _ in range(4)] == [True, True, True, False]
    assert buckets.take("b")  # another client has a bucket of its own
    clock.now += 0.1  # one token back
    assert buckets.take("a") and not buckets.take("a")
    clock.now += 60  # never more than the burst
    assert sum(buckets.take("a") for _ in range(10)) == 3


def test_refused_takes_do_not_drain_the_bucket_further() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=10, burst=1, clock=clock)
    assert buckets.take("a")
    for _ in range(100):
        buckets.take("a")
    clock.now += 0.1
    assert buckets.take("a")


def test_full_buckets_are_forgotten_past_the_table_size() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1, burst=2, clock=clock, max_clients=3)
    for client in "abc":
        buckets.take(client)
    clock.now += 10  # a, b, c are full again
    buckets.take("d")
    buckets.take("e")
    assert set(buckets._state) <= {"d", "e"}


def test_slots_per_client_and_in_total() -> None:
    slots = Slots(per_client=2, total=3)
    assert slots.acquire("a") and slots.acquire("a") and not slots.acquire("a")
    assert slots.acquire("b") and not slots.acquire("c")  # the total is reached
    slots.release("a")
    assert slots.acquire("c") and slots.held() == 3 and slots.held("a") == 1
    for client in "abc":
        slots.release(client)
    assert slots.held() == 0 and slots._held == {}
