"""The DNS filter's decisions, against the tests' stub upstream on loopback and a fake
network layer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from paddockd.domain.network import policy
from paddockd.netpolicy.base import BoxAddress
from paddockd.netpolicy.dns import DnsFilter, parse_upstream
from paddockd.netpolicy.fake import FakeNetwork

from ...dnsstub import DnsStub
from ...netlab import ALLOWED, OTHER

BOX = "10.213.0.9"
pytestmark = pytest.mark.anyio


@pytest.fixture
def stub() -> Iterator[DnsStub]:
    s = DnsStub()
    yield s
    s.close()


def ask(name: str) -> bytes:
    packed: bytes = DNSRecord.question(name, "A").pack()
    return packed


async def test_allowed_names_are_forwarded_and_admitted(stub: DnsStub) -> None:
    net, seen = FakeNetwork(), []
    await net.sync([BoxAddress("b1", BOX, policy("allowlist", ["allowed.test", "*.wild.test"]))])
    dns = DnsFilter(net, [parse_upstream(stub.address)], lambda *e: seen.append(e))
    reply = DNSRecord.parse(await dns.answer(ask("allowed.test"), BOX))
    assert [str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.A] == [ALLOWED]
    assert net.admitted == {(BOX, ALLOWED): 300}
    assert seen == [("b1", "allowed.test", "allowed", [ALLOWED])]


async def test_other_names_get_nxdomain_without_asking_upstream(stub: DnsStub) -> None:
    net, seen = FakeNetwork(), []
    await net.sync([BoxAddress("b1", BOX, policy("allowlist", ["allowed.test"]))])
    dns = DnsFilter(net, [parse_upstream(stub.address)], lambda *e: seen.append(e))
    reply = DNSRecord.parse(await dns.answer(ask("other.test"), BOX))
    assert reply.header.rcode == RCODE.NXDOMAIN and stub.asked == []
    assert seen == [("b1", "other.test", "refused", [])] and net.admitted == {}


async def test_allow_all_admits_nothing_and_deny_all_resolves_nothing(stub: DnsStub) -> None:
    net = FakeNetwork()
    await net.sync(
        [
            BoxAddress("a", BOX, policy("allow-all")),
            BoxAddress("d", "10.213.0.10", policy("deny-all")),
        ]
    )
    dns = DnsFilter(net, [parse_upstream(stub.address)], lambda *e: None)
    reply = DNSRecord.parse(await dns.answer(ask("other.test"), BOX))
    assert [str(rr.rdata) for rr in reply.rr] == [OTHER] and net.admitted == {}
    reply = DNSRecord.parse(await dns.answer(ask("other.test"), "10.213.0.10"))
    assert reply.header.rcode == RCODE.NXDOMAIN


async def test_strangers_garbage_and_a_dead_upstream(stub: DnsStub) -> None:
    net = FakeNetwork()
    await net.sync([BoxAddress("a", BOX, policy("allow-all"))])
    dead = DnsFilter(net, [("127.0.0.1", 9)], lambda *e: None, timeout=0.5)
    stranger = DNSRecord.parse(await dead.answer(ask("allowed.test"), "10.213.0.77"))
    assert stranger.header.rcode == RCODE.REFUSED
    assert await dead.answer(b"\x00\x01garbage", BOX) is None
    failed = DNSRecord.parse(await dead.answer(ask("allowed.test"), BOX))
    assert failed.header.rcode == RCODE.SERVFAIL


def test_upstream_syntax() -> None:
    assert parse_upstream("10.0.0.2") == ("10.0.0.2", 53)
    assert parse_upstream(" 127.0.0.1:5353 ") == ("127.0.0.1", 5353)
