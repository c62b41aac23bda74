"""A hostile box against Paddock's DNS resolver: hundreds of idle TCP connections (which
once took paddockd's descriptors and its API down) and a query with two questions (once
checked on the first and forwarded whole). Run as root in a real box."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from ...dnsstub import DnsStub
from ..conftest import Server

ATTACK = Path(__file__).with_name("dnsattack.py").read_text()


def attack(server: Server, box: str, *args: str) -> subprocess.Popen[str]:
    argv = server.cli_argv("exec", "-u", "root", box, "--", "python3", "-c", ATTACK, *args)
    return subprocess.Popen(argv, env=server.env, stdout=subprocess.PIPE, text=True)


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_idle_tcp_connections_cannot_exhaust_paddockd(server: Server, box: str) -> None:
    assert server.proc is not None
    pid = server.proc.pid
    before = descriptors(pid)
    holder = attack(server, box, "hold", "300", "16")
    most, slowest = before, 0.0
    with server.client() as c:
        while holder.poll() is None:
            most = max(most, descriptors(pid))
            start = time.monotonic()
            c.list_boxes()  # the API keeps answering while the box holds its connections
            slowest = max(slowest, time.monotonic() - start)
            time.sleep(0.5)
    out, _ = holder.communicate()
    report = json.loads(out)
    assert report["opened"] > 100, report  # the attack did connect
    # 16 connections per box (a few more while the extra ones are being shut): the rest
    # are closed at once, and the 16 when their first query has not come in 10 s.
    assert most - before <= 40, (before, most)
    assert slowest < 2.0
    assert report["open"] == 0, report
    # Held: closed well after the last was opened; each when it had been idle 10 s.
    late = [age for after_all, age in report["closed"] if after_all > 3]
    assert len(late) <= 16 and all(9 <= age <= 13 for age in late), report
    assert descriptors(pid) <= before + 5


def test_two_questions_are_refused_and_not_forwarded(
    server: Server, box: str, dns_stub: DnsStub
) -> None:
    asked = len(dns_stub.asked)

    def rcode(*names: str) -> int:
        out, _ = attack(server, box, "ask", *names).communicate(timeout=60)
        return int(out)

    assert rcode("other.test", "allowed.test") == 1  # FORMERR
    assert dns_stub.asked[asked:] == []
    assert rcode("allowed.test") == 0 and dns_stub.asked[asked:] == ["allowed.test"]
