"""The upstream DNS of the tests' Paddock resolvers: a stub on loopback that knows a few
names in the test internet and records every question it is asked (so a test can prove a
refused name never left paddockd)."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading

from dnslib import QTYPE, RCODE, RR, A, DNSRecord

from .netlab import ALLOWED, OTHER, PRIVATE, WILD

ZONE = {"allowed.test": ALLOWED, "other.test": OTHER, "private.test": PRIVATE}
WILDCARDS = {".wild.test": WILD}
TTL = 300


def lookup(name: str) -> str | None:
    name = name.rstrip(".").lower()
    if name in ZONE:
        return ZONE[name]
    return next((ip for suffix, ip in WILDCARDS.items() if name.endswith(suffix)), None)


class DnsStub:
    __test__ = False

    def __init__(self) -> None:
        self.asked: list[str] = []
        stub = self

        def respond(data: bytes) -> bytes:
            query = DNSRecord.parse(data)
            name = str(query.q.qname)
            stub.asked.append(name.rstrip(".").lower())
            reply = query.reply()
            address = lookup(name)
            if address is None:
                reply.header.rcode = RCODE.NXDOMAIN
            elif query.q.qtype == QTYPE.A:
                reply.add_answer(RR(name, QTYPE.A, rdata=A(address), ttl=TTL))
            packed: bytes = reply.pack()
            return packed

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                sock.sendto(respond(data), self.client_address)

        class Tcp(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                (size,) = struct.unpack("!H", self.rfile.read(2))
                answer = respond(self.rfile.read(size))
                self.wfile.write(struct.pack("!H", len(answer)) + answer)

        # One port for both: a free UDP port may be a busy TCP one, so try again then.
        for _ in range(20):
            self.udp = socketserver.ThreadingUDPServer(("127.0.0.1", 0), Udp)
            self.port = self.udp.server_address[1]
            try:
                self.tcp = _TcpServer(("127.0.0.1", self.port), Tcp)
                break
            except OSError:
                self.udp.server_close()
        else:
            raise OSError("no port free for both UDP and TCP on 127.0.0.1")
        for srv in (self.udp, self.tcp):
            threading.Thread(target=srv.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        for srv in (self.udp, self.tcp):
            srv.shutdown()
            srv.server_close()


def resolve(stub: DnsStub, name: str) -> list[str]:
    """Ask the stub directly (a check of the stub itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(DNSRecord.question(name).pack(), ("127.0.0.1", stub.port))
        reply = DNSRecord.parse(s.recv(4096))
    return [str(rr.rdata) for rr in reply.rr]


class _TcpServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
