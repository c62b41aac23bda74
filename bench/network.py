"""Network policy benchmark: connection setup and throughput from a box to the on-machine
test internet under a domain allowlist vs allow-all, and how long a policy change takes
to be enforced. Nothing leaves the machine (tests/netlab.py).

    /opt/paddock/venv/bin/python -m bench.network [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from tests.dnsstub import DnsStub
from tests.harness import Server
from tests.netlab import WILD, TestInternet

from ._table import Row, print_table

# Runs in the box, so exec overhead is not in the numbers. "first": a new name each time
# (resolver + admission + connect + one HTTP exchange); "later": the same, by address,
# already admitted; "bulk": MiB/s of one 512 MiB download.
PROBE = """
import json, socket, sys, time
kind, runs, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def exchange(host, port=80):
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    got = 0
    while chunk := s.recv(1 << 20):
        got += len(chunk)
    s.close()
    return got
out = []
for i in range(runs):
    started = time.perf_counter()
    if kind == "first":
        exchange(f"n{i}-{tag}.wild.test")
    elif kind == "later":
        exchange(sys.argv[4])
    else:
        got = exchange(sys.argv[4], 82)
        out.append(got / (1 << 20) / (time.perf_counter() - started))
        continue
    out.append(time.perf_counter() - started)
print(json.dumps(out))
"""


def probe(srv: Server, box: str, kind: str, runs: int) -> list[float]:
    tag = uuid.uuid4().hex[:6]
    out = srv.cli(
        "exec", box, "--", "python3", "-c", PROBE, kind, str(runs), tag, WILD, check=True
    ).stdout
    samples: list[float] = json.loads(out)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    internet, stub = TestInternet(work), DnsStub()
    srv = Server(work / "server", upstream_dns=stub.address)
    rows: list[Row] = []
    try:
        srv.cli("new", "--name", "open", check=True)
        srv.cli("new", "--name", "listed", "--allow", "*.wild.test", check=True)
        med = statistics.median
        # Interleaved rounds, so drift on a busy 2-core machine hits both sides alike.
        samples: dict[str, dict[str, list[float]]] = {}
        for kind, rounds, per_round in (
            ("first", 5, runs // 5),
            ("later", 5, runs // 5),
            ("bulk", 5, 1),
        ):
            samples[kind] = {"listed": [], "open": []}
            for _ in range(rounds):
                for b in ("listed", "open"):
                    samples[kind][b] += probe(srv, b, kind, max(per_round, 1))
        first, later, bulk = (
            {b: med(v) for b, v in samples[k].items()} for k in ("first", "later", "bulk")
        )
        rows += [
            Row(
                "first connection to a new name (DNS + admit)",
                first["listed"],
                first["open"],
                "s",
                "report",
            ),
            Row(
                "later connections, allowlist vs allow-all",
                later["listed"],
                later["open"],
                "s",
                "<= 1.05",
            ),
            Row(
                "throughput, allowlist vs allow-all",
                bulk["listed"],
                bulk["open"],
                "MiB/s",
                ">= 0.95",
                higher_is_better=True,
            ),
        ]
        with srv.client() as c:
            updates = []
            for i in range(runs):
                mode = "deny-all" if i % 2 == 0 else "allow-all"
                started = time.perf_counter()
                c.set_network("open", mode)  # returns once the rules are in the kernel
                updates.append(time.perf_counter() - started)
        rows.append(
            Row("policy change -> enforced (API round trip)", med(updates), None, "s", "< 100 ms")
        )
    finally:
        srv.close()
        stub.close()
        internet.close()
    print_table(
        f"network policy (median of {runs}; first-connection added latency = "
        f"{(first['listed'] - first['open']) * 1000:.1f} ms)",
        rows,
    )


if __name__ == "__main__":
    main()
