"""Webhooks (services/webhooks.py) with a fake receiver, and box events as the store tells
them (services/box_events.py): whose events each webhook gets, signatures, retries with
backoff, a box's events in order, a member's webhook kept off private addresses."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from paddockd.domain.accounts import Role, User
from paddockd.domain.errors import InvalidRequest, NotFound
from paddockd.domain.webhooks import Event, check_url, public_address, sign, verify
from paddockd.services.webhooks import ATTEMPTS, Unreachable, WebhookService
from paddockd.store.credentials import Sealer
from paddockd.store.webhooks import DELIVERED, FAILED, WebhookRepository

from ..conftest import World

pytestmark = pytest.mark.anyio

OWNER = User("", "admin", Role.OWNER)
BOB = User("u-bob", "bob", Role.MEMBER)
ALICE = User("u-alice", "alice", Role.MEMBER)


@dataclass
class Receiver:
    """Answers each POST for a box with the next of `answers[box id]` (then 200), and
    keeps what came. (Deliveries for several boxes go side by side, in any order.)"""

    answers: dict[str, list[int | Exception]] = field(default_factory=dict)
    got: list[tuple[str, dict[str, str], bytes, bool]] = field(default_factory=list)

    async def post(
        self, url: str, headers: list[tuple[str, str]], body: bytes, public_only: bool
    ) -> int:
        self.got.append((url, dict(headers), body, public_only))
        queued = self.answers.get(json.loads(body)["box"]["id"], [])
        answer = queued.pop(0) if queued else 200
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _event(box_id: str, owner_id: str | None, n: int = 0) -> Event:
    return Event(f"ev{box_id}{n}", "box.stopped", 1.0, box_id, "web", owner_id, {"n": n})


@pytest.fixture
def hooks(world: World) -> tuple[WebhookService, Receiver, Clock]:
    receiver, clock = Receiver(), Clock()
    repo = WebhookRepository(world.db, Sealer(world.cfg.data_dir / "credentials.key"))
    return WebhookService(repo, receiver, retry_seconds=5.0, now=clock), receiver, clock


def test_signatures_verify_and_refuse_tampering_and_replays() -> None:
    body = b'{"type":"box.started"}'
    header = sign("whsec_x", body, at=1000)
    assert verify("whsec_x", body, header, now=1000 + 299)
    assert not verify("whsec_x", body, header, now=1000 + 301)  # replayed later
    assert not verify("whsec_y", body, header, now=1000)
    assert not verify("whsec_x", body + b" ", header, now=1000)
    assert not verify("whsec_x", body, "t=abc,v1=00", now=1000)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://x.example.com/",
        "https://user:pw@x.example.com/",
        "http:///nohost",
        "https://x.example.com:99999/",
        "https://x.example.com/a b",
        "https://x.example.com/" + "a" * 2100,
        "http://a..b/",
        "http://" + "a" * 64 + ".example.com/",
        "http://x.example.com/\u00e9",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidRequest):
        check_url(url)


def test_only_public_addresses_for_members() -> None:
    assert public_address("93.184.216.34")
    for address in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "172.17.0.2", "::1", "fd00::1"):
        assert not public_address(address), address
    assert not public_address("::ffff:127.0.0.1")
    # IPv4 inside IPv6: NAT64, 6to4 and the old compatible form are judged as that IPv4.
    for address in ("64:ff9b::a00:1", "2002:a00:1::", "::a00:1"):
        assert not public_address(address), address
    assert not public_address("not-an-address")


async def test_whose_events_each_webhook_gets(
    hooks: tuple[WebhookService, Receiver, Clock],
) -> None:
    svc, receiver, _ = hooks
    everything, _ = await svc.add(OWNER, "http://127.0.0.1:9/all", [])
    bobs, secret = await svc.add(BOB, "https://hooks.example.com/bob", ["box.stopped"])
    await svc.add(BOB, "https://hooks.example.com/starts", ["box.started"])
    await svc.publish(_event("b1", "u-bob"))
    await svc.publish(_event("a1", "u-alice"))
    await svc.publish(_event("o1", None))
    assert await svc.deliver_due() == 4  # all: 3; bob's stop hook: bob's box only
    urls = sorted((url, json.loads(body)["box"]["id"]) for url, _, body, _ in receiver.got)
    assert urls == [
        ("http://127.0.0.1:9/all", "a1"),
        ("http://127.0.0.1:9/all", "b1"),
        ("http://127.0.0.1:9/all", "o1"),
        ("https://hooks.example.com/bob", "b1"),
    ]
    for url, headers, body, public_only in receiver.got:
        assert public_only == (url != "http://127.0.0.1:9/all")  # a member's: public only
        if url.endswith("/bob"):
            assert verify(secret, body, headers["Paddock-Signature"])
            assert headers["paddock-event"] == "box.stopped"
            assert b"u-bob" not in body  # no owner id in what is sent
    # Each sees their own webhooks; the owner sees all; another's is "not found".
    assert [h.id for h in await svc.listed(ALICE)] == []
    assert {h.id for h in await svc.listed(BOB)} >= {bobs.id}
    assert len(await svc.listed(OWNER)) == 3
    with pytest.raises(NotFound):
        await svc.remove(bobs.id, ALICE)
    with pytest.raises(NotFound):
        await svc.log(everything.id, BOB)


async def test_retries_back_off_and_keep_a_box_in_order(
    hooks: tuple[WebhookService, Receiver, Clock],
) -> None:
    svc, receiver, clock = hooks
    hook, _ = await svc.add(OWNER, "http://127.0.0.1:9/x", [])
    receiver.answers = {"b1": [500, Unreachable("connection refused")]}
    await svc.publish(_event("b1", None, 1))
    await svc.publish(_event("b1", None, 2))
    await svc.publish(_event("b2", None, 1))
    # b1's first fails; its second waits for it; b2's goes on its own.
    assert await svc.deliver_due() == 2
    assert sorted(json.loads(b)["box"]["id"] for _, _, b, _ in receiver.got) == ["b1", "b2"]
    assert await svc.deliver_due() == 0  # not due yet: 5 s
    clock.now += 5
    assert await svc.deliver_due() == 1  # b1#1 again
    clock.now += 14
    assert await svc.deliver_due() == 0  # the second wait is 15 s
    clock.now += 1
    assert await svc.deliver_due() == 1  # b1#1, delivered at last
    assert await svc.deliver_due() == 1  # then b1#2
    sent = [(json.loads(b)["box"]["id"], json.loads(b)["data"]["n"]) for _, _, b, _ in receiver.got]
    assert [n for box, n in sent if box == "b1"] == [1, 1, 1, 2]  # in order, after retries
    log = await svc.log(hook.id, OWNER)
    assert [d.state for d in log] == [DELIVERED] * 3
    first = log[-1]
    assert first.attempts == 3 and first.status == 200 and first.error is None


async def test_a_delivery_fails_after_its_last_try(
    hooks: tuple[WebhookService, Receiver, Clock],
) -> None:
    svc, receiver, clock = hooks
    hook, _ = await svc.add(OWNER, "http://127.0.0.1:9/x", [])
    receiver.answers = {"b1": [503] * ATTEMPTS}
    await svc.publish(_event("b1", None))
    for _ in range(ATTEMPTS):
        clock.now += 3600
        assert await svc.deliver_due() == 1
    (done,) = await svc.log(hook.id, OWNER)
    assert done.state == FAILED and done.attempts == ATTEMPTS and done.status == 503
    assert await svc.deliver_due() == 0


async def test_test_send_and_limits(hooks: tuple[WebhookService, Receiver, Clock]) -> None:
    svc, receiver, _ = hooks
    hook, _ = await svc.add(BOB, "https://hooks.example.com/x", [])
    assert (await svc.test(hook.id, BOB)).delivered
    receiver.answers = {"": [Unreachable("hooks.example.com is not a public address")]}
    failed = await svc.test(hook.id, BOB)
    assert not failed.delivered and "not a public address" in (failed.error or "")
    assert [d.state for d in await svc.log(hook.id, BOB)] == [FAILED, DELIVERED]
    with pytest.raises(InvalidRequest, match="unknown event"):
        await svc.add(BOB, "https://hooks.example.com/y", ["box.exploded"])
    for n in range(19):
        await svc.add(BOB, f"https://hooks.example.com/{n}", [])
    with pytest.raises(InvalidRequest, match="at most 20"):
        await svc.add(BOB, "https://hooks.example.com/too-many", [])
    assert len(await svc.listed(ALICE)) == 0
    await svc.add(ALICE, "https://hooks.example.com/alice", [])  # each their own 20


async def test_box_events_as_the_store_tells_them(world: World) -> None:
    told: list[Event] = []
    events = world.wired.box_events
    assert events is not None
    events._publish = _collect(told)  # type: ignore[method-assign]
    watching = asyncio.get_running_loop().create_task(events.run())
    try:
        await asyncio.sleep(0.05)
        box = await world.boxes.create("ev", "small", 600, "stop")
        await _until(lambda: {"box.created", "box.started"} <= {e.type for e in told})
        await world.services.snapshots.take(box.id, "before")
        await _until(lambda: "snapshot.taken" in {e.type for e in told})
        await world.boxes.stop(box.id)
        await _until(lambda: "box.stopped" in {e.type for e in told})
        world.clock.advance(10)
        await world.boxes.resume(box.id)
        running = await world.boxes.get(box.id)
        assert running is not None
        await world.boxes.expire(running)
        await _until(lambda: len([e for e in told if e.type == "box.stopped"]) == 2)
        await world.boxes.delete(box.id, force=True)
        await world.reconciler.drain()
        await _until(lambda: "box.deleted" in {e.type for e in told})
    finally:
        watching.cancel()
    stops = [e.data["reason"] for e in told if e.type == "box.stopped"]
    assert stops == ["user", "ttl"]
    snap = next(e for e in told if e.type == "snapshot.taken")
    assert snap.data["label"] == "before" and snap.box_name == "ev"
    assert all(e.box_id == box.id for e in told)


def _collect(into: list[Event]):  # type: ignore[no-untyped-def]
    async def publish(event: Event) -> None:
        into.append(event)

    return publish


async def _until(done, within: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not done():
        assert loop.time() < deadline, "not told in time"
        await asyncio.sleep(0.05)


async def test_one_slow_webhook_takes_a_fair_share(
    hooks: tuple[WebhookService, Receiver, Clock],
) -> None:
    svc, _, _ = hooks
    await svc.add(OWNER, "http://127.0.0.1:9/flooded", [])
    for n in range(10):
        await svc.publish(_event(f"b{n}", None))  # ten boxes: ten heads of its queue
    other, _ = await svc.add(OWNER, "http://127.0.0.1:9/other", ["box.started"])
    await svc.publish(Event("e-other", "box.started", 1.0, "x1", "x", None))
    assert await svc.deliver_due() == 5  # four of the flooded one's, and the other's
    assert [d.state for d in await svc.log(other.id, OWNER)] == ["delivered"]


async def test_a_receiver_that_never_answers_stops_the_queue_growing(
    hooks: tuple[WebhookService, Receiver, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    from paddockd.services import webhooks

    svc, _, _ = hooks
    monkeypatch.setattr(webhooks, "MAX_PENDING", 3)
    hook, _ = await svc.add(OWNER, "http://127.0.0.1:9/down", [])
    for n in range(5):
        await svc.publish(_event("b1", None, n))
    assert len(await svc.log(hook.id, OWNER)) == 3
