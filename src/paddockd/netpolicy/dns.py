"""Paddock's DNS resolver for boxes: the only DNS a box can reach (the rules redirect its
queries here and refuse DNS to anyone else).

A name the box's policy allows is forwarded upstream, and for allowlisted boxes the A
records of the answer are admitted for that box before the answer goes back, so the
connection that follows is let through. A name the policy does not allow is answered
NXDOMAIN at once: tools fail with "could not resolve host", not a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

from dnslib import QTYPE, RCODE, DNSRecord

from .base import NetworkRules

log = logging.getLogger("paddockd.dns")

# box id, queried name, verdict (allowed | refused), addresses the answer gave
Recorder = Callable[[str, str, str, list[str]], None]


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
    ) -> None:
        self._net = network
        self._upstreams = upstreams
        self._record = record
        self._timeout = timeout
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None

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
        try:
            while True:
                (size,) = struct.unpack("!H", await reader.readexactly(2))
                reply = await self.answer(await reader.readexactly(size), client, tcp=True)
                if reply is None:
                    break
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    # -- deciding ---------------------------------------------------------------------
    async def answer(self, query: bytes, client: str, *, tcp: bool = False) -> bytes | None:
        try:
            request = DNSRecord.parse(query)
        except Exception:  # dnslib raises several kinds on garbage
            return None
        box = self._net.box_at(client)
        if box is None:
            return _reply(request, RCODE.REFUSED)
        name = str(request.q.qname).rstrip(".").lower()
        if not box.policy.allows_name(name):
            self._record(box.box_id, name, "refused", [])
            return _reply(request, RCODE.NXDOMAIN)
        response = await self._forward(query, request.header.id, tcp)
        if response is None:
            return _reply(request, RCODE.SERVFAIL)
        addresses = _a_records(response)
        if box.policy.mode == "allowlist" and addresses:
            await self._net.admit(box.ip, addresses)
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
        task = asyncio.create_task(self._reply(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply(self, data: bytes, addr: tuple[str, int]) -> None:
        try:
            reply = await self._resolver.answer(data, addr[0])
        except Exception:
            log.exception("DNS query from %s failed", addr[0])
            return
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)


def _reply(request: Any, rcode: int) -> bytes:
    reply = request.reply()
    reply.header.rcode = rcode
    packed: bytes = reply.pack()
    return packed


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
        (size,) = struct.unpack("!H", await reader.readexactly(2))
        return await reader.readexactly(size)
    finally:
        writer.close()
