"""Paddock's DNS resolver for boxes: the only DNS a box can reach (the rules redirect its
queries here and refuse DNS to anyone else).

A name the box's policy allows is forwarded upstream, and for allowlisted boxes the A
records of the answer are admitted for that box before the answer goes back, so the
connection that follows is let through. A name the policy does not allow is answered
NXDOMAIN at once: tools fail with "could not resolve host", not a timeout.

Every query is hostile input: only a plain query with exactly one question is looked at
(anything else is answered FORMERR or NOTIMP and never forwarded), and each box is held to
the limits of `DnsLimits`, so one box cannot take descriptors, tasks or the resolver's
attention from paddockd or from the other boxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from dnslib import OPCODE, QTYPE, RCODE, DNSHeader, DNSRecord

from .base import NetworkRules
from .quotas import Slots, TokenBuckets

log = logging.getLogger("paddockd.dns")

# box id, queried name, verdict (allowed | refused), addresses the answer gave
Recorder = Callable[[str, str, Literal["allowed", "refused"], list[str]], None]
# The longest name DNS can carry, in its dotted text form (RFC 1035: 255 octets on the wire).
_MAX_NAME = 253
_SAY_EVERY = 60.0
# How long a query from an unknown address waits for paddockd's first rules after it starts.
FIRST_WRITE_WAIT = 5.0


@dataclass(frozen=True)
class DnsLimits:
    """What one box may ask of the resolver. A busy box (a build resolving hundreds of
    names) stays well inside them; a hostile one meets them long before paddockd runs out
    of descriptors (1024 by default under systemd) or the event loop falls behind.

    Over the query rate, UDP queries are dropped unread and a TCP connection is closed:
    dropping costs the resolver nothing per excess packet (no parsing, no reply), and a
    stub resolver that hears nothing backs off and retries, so the flood slows itself;
    a REFUSED for each would keep paddockd parsing and answering at the flood's pace."""

    tcp_first_query: float = 10.0  # seconds a new TCP connection has to send its query
    tcp_idle: float = 3.0  # seconds between queries on it (RFC 7766 §6.2.3: "seconds")
    tcp_lifetime: float = 30.0  # seconds any TCP connection lives, busy or not
    tcp_per_box: int = 16  # TCP connections open at once; more are closed at once
    tcp_total: int = 128  # …and for all boxes together
    rate: float = 100.0  # queries a second per box, UDP and TCP together (token bucket)
    burst: int = 200
    udp_per_box: int = 32  # UDP queries being answered at once (each holds a socket upstream)
    udp_total: int = 256  # …and for all boxes together; more are dropped


def parse_upstream(text: str) -> tuple[str, int]:
    """`10.0.0.2` or `127.0.0.1:5353` (IPv4 upstreams only)."""
    host, sep, port = text.strip().partition(":")
    return host, int(port) if sep else 53


def system_upstreams(resolv_conf: str = "/etc/resolv.conf") -> list[tuple[str, int]]:
    found = []
    with contextlib.suppress(OSError), open(resolv_conf) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver" and ":" not in parts[1]:
                found.append((parts[1], 53))
    return found


class DnsFilter:
    def __init__(
        self,
        network: NetworkRules,
        upstreams: list[tuple[str, int]],
        record: Recorder,
        timeout: float = 3.0,
        limits: DnsLimits | None = None,
        bound: Callable[[str, str], bool] = lambda box_id, name: False,
    ) -> None:
        """`bound(box id, name)`: whether a secret attached to that box is bound to the
        name, so that HTTPS to its addresses goes through the credential gateway."""
        self._net = network
        self._bound = bound
        self._upstreams = upstreams
        self._record = record
        self._timeout = timeout
        self._limits = limits or DnsLimits()
        self._rate = TokenBuckets(self._limits.rate, self._limits.burst)
        self._udp_slots = Slots(self._limits.udp_per_box, self._limits.udp_total)
        self._tcp_slots = Slots(self._limits.tcp_per_box, self._limits.tcp_total)
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self.failures = 0  # queries that could not be answered (see `failed`)
        self._said_at = -_SAY_EVERY

    # -- serving ----------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _UdpProtocol(self), local_addr=(host, port), reuse_port=False
        )
        self._udp = transport
        self._tcp = await asyncio.start_server(self._serve_tcp, host, port, reuse_address=True)
        log.info("DNS filter for boxes on %s:%d, upstream %s", host, port, self._upstreams)

    async def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = writer.get_extra_info("peername")[0]
        if not self._tcp_slots.acquire(client):
            writer.transport.abort()  # over the box's cap (or everyone's): closed at once
            return
        try:
            async with asyncio.timeout(self._limits.tcp_lifetime):
                await self._tcp_queries(reader, writer, client)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._tcp_slots.release(client)
            # abort, not close: close would wait to flush replies a box never reads, and
            # keep the descriptor for as long as the box likes.
            writer.transport.abort()

    async def _tcp_queries(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str
    ) -> None:
        wait = self._limits.tcp_first_query
        while True:
            query = await asyncio.wait_for(_read_message(reader), wait)
            if not self._rate.take(client):
                return
            reply = await self.answer(query, client, tcp=True)
            if reply is None:
                return
            writer.write(struct.pack("!H", len(reply)) + reply)
            await writer.drain()
            wait = self._limits.tcp_idle

    def udp_admitted(self, client: str) -> bool:
        """Whether to take on a UDP query; `udp_done` when it is answered."""
        return self._rate.take(client) and self._udp_slots.acquire(client)

    def udp_done(self, client: str) -> None:
        self._udp_slots.release(client)

    def failed(self, client: str, exc: Exception) -> None:
        """A query that could not be answered: counted; logged in one line a minute."""
        self.failures += 1
        now = time.monotonic()
        if now - self._said_at >= _SAY_EVERY:
            self._said_at = now
            log.warning(
                "DNS: %d queries could not be answered so far (last from %s: %s: %s)",
                self.failures,
                client,
                type(exc).__name__,
                str(exc)[:200],
            )

    # -- deciding ---------------------------------------------------------------------
    async def answer(self, query: bytes, client: str, *, tcp: bool = False) -> bytes | None:
        try:
            request = DNSRecord.parse(query)
        except Exception:  # dnslib raises several kinds on garbage
            return None
        if request.header.qr:
            return None  # a response, not a query: answering it could start a loop
        box = self._net.box_at(client)
        if box is None:
            # Just after paddockd starts, its boxes are known once the rules are first
            # written: a box asking then is answered then, not refused.
            await self._net.written(FIRST_WRITE_WAIT)
            box = self._net.box_at(client)
        if box is None:
            return _reply(request, RCODE.REFUSED)
        malformed = _malformed(request)
        if malformed is not None:
            return _bare_reply(request, malformed)
        name = str(request.q.qname).rstrip(".").lower()
        if len(name) > _MAX_NAME or any(len(label) > 63 for label in name.split(".")):
            # No such name can exist; dnslib would refuse to pack an answer naming it.
            return _bare_reply(request, int(RCODE.FORMERR))
        if not box.policy.allows_name(name):
            self._record(box.box_id, name, "refused", [])
            return _reply(request, RCODE.NXDOMAIN)
        response = await self._forward(query, request.header.id, tcp)
        if response is None:
            return _reply(request, RCODE.SERVFAIL)
        addresses = _a_records(response)
        if box.policy.mode == "allowlist" and addresses:
            await self._net.admit(box.ip, addresses)
        if addresses and self._bound(box.box_id, name):
            await self._net.intercept(box.ip, addresses)
        if request.q.qtype in (QTYPE.A, QTYPE.AAAA, QTYPE.ANY):
            self._record(box.box_id, name, "allowed", [a for a, _ in addresses])
        return response

    async def _forward(self, query: bytes, query_id: int, tcp: bool) -> bytes | None:
        for upstream in self._upstreams:
            try:
                ask = _ask_tcp if tcp else _ask_udp
                reply = await asyncio.wait_for(ask(upstream, query), self._timeout)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                log.warning("upstream DNS %s:%d: %s", *upstream, exc or "timed out")
                continue
            if len(reply) >= 2 and struct.unpack("!H", reply[:2])[0] == query_id:
                return reply
        return None


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, resolver: DnsFilter) -> None:
        self._resolver = resolver
        self._transport: asyncio.DatagramTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        client = addr[0]
        if not self._resolver.udp_admitted(client):
            return  # dropped unread: see DnsLimits
        task = asyncio.create_task(self._reply(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._resolver.udp_done(client))

    async def _reply(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            reply = await self._resolver.answer(data, addr[0])
        except Exception as exc:
            # What a box sends is the box's to choose: counted, and said once a minute at
            # most, never traced (a trace per query once made 11 GB of log a day).
            self._resolver.failed(addr[0], exc)
            return
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)


def _malformed(request: Any) -> int | None:
    """The rcode for a query the filter will not look into, or None for a plain one.
    Only the question is checked against the policy and the query is forwarded whole, so
    a second question (or records in the answer or authority section, or an UPDATE)
    would ride past the check to the upstream."""
    if request.header.opcode != OPCODE.QUERY:
        return int(RCODE.NOTIMP)
    if len(request.questions) != 1 or request.rr or request.auth:
        return int(RCODE.FORMERR)
    return None


def _reply(request: Any, rcode: int) -> bytes:
    reply = request.reply()
    reply.header.rcode = rcode
    packed: bytes = reply.pack()
    return packed


def _bare_reply(request: Any, rcode: int) -> bytes:
    """A header-only answer: nothing of a malformed query is echoed back."""
    header = DNSHeader(id=request.header.id, qr=1, opcode=request.header.opcode, rcode=rcode)
    packed: bytes = DNSRecord(header).pack()
    return packed


async def _read_message(reader: asyncio.StreamReader) -> bytes:
    """One length-prefixed DNS message of a TCP stream (RFC 1035 §4.2.2)."""
    (size,) = struct.unpack("!H", await reader.readexactly(2))
    return await reader.readexactly(size)


def _a_records(response: bytes) -> list[tuple[str, int]]:
    try:
        parsed = DNSRecord.parse(response)
    except Exception:
        return []
    return [(str(rr.rdata), int(rr.ttl)) for rr in parsed.rr if rr.rtype == QTYPE.A]


async def _ask_udp(upstream: tuple[str, int], query: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, upstream)
        await loop.sock_sendall(sock, query)
        return await loop.sock_recv(sock, 65535)


async def _ask_tcp(upstream: tuple[str, int], query: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*upstream)
    try:
        writer.write(struct.pack("!H", len(query)) + query)
        await writer.drain()
        return await _read_message(reader)
    finally:
        writer.close()
