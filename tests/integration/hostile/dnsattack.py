"""What a hostile box does to Paddock's DNS resolver, run in the box as
`python3 -c SOURCE ACTION ARGS...` (standard library only). The resolver answers on the
bridge's gateway address, port 53. The box's /etc/resolv.conf may name Docker's embedded
DNS (127.0.0.11) instead, which forwards there; a hostile box goes to the gateway itself."""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time


def _resolver() -> str:
    """The default route's gateway, from /proc/net/route (hex, little-endian)."""
    with open("/proc/net/route") as f:
        fields = next(line.split() for line in f if line.split()[1:2] == ["00000000"])
    return socket.inet_ntoa(struct.pack("<I", int(fields[2], 16)))


def hold(count: str, seconds: str) -> None:
    """Open `count` TCP connections, send nothing, and report when the server closed each
    (seconds after they were all open, and after that one was) and how many it never
    closed. Opening them all takes seconds on a loaded machine: a connection's own age is
    what the server's idle timeout counts."""
    resolver, conns, since = _resolver(), {}, {}
    for _ in range(int(count)):
        sock = socket.socket()
        sock.settimeout(2)
        try:
            sock.connect((resolver, 53))
        except OSError:
            sock.close()
            continue
        conns[sock.fileno()] = sock
        since[sock.fileno()] = time.monotonic()
    opened, start, closed = len(conns), time.monotonic(), []
    poll = select.poll()
    for fd in conns:
        poll.register(fd, select.POLLIN)
    while conns and time.monotonic() < start + float(seconds):
        for fd, _ in poll.poll(200):
            poll.unregister(fd)
            conns.pop(fd).close()
            now = time.monotonic()
            closed.append((round(now - start, 2), round(now - since[fd], 2)))
    print(json.dumps({"opened": opened, "closed": closed, "open": len(conns)}))


def ask(*names: str) -> None:
    """One UDP query holding all `names` as questions; prints the answer's rcode."""
    questions = b""
    for name in names:
        labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
        questions += labels + b"\0" + struct.pack("!HH", 1, 1)  # A, IN
    query = struct.pack("!6H", 0x5AD, 0x0100, len(names), 0, 0, 0) + questions
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    sock.sendto(query, (_resolver(), 53))
    print(struct.unpack("!6H", sock.recv(4096)[:12])[1] & 0xF)


if __name__ == "__main__":
    actions = {f.__name__: f for f in (hold, ask)}
    actions[sys.argv[1]](*sys.argv[2:])
