"""Noisy neighbours: one box runs each exhaustion attack in turn; another box's `exec true`
p99 and a new box's create-to-first-exec are measured meanwhile, against the same figures
on the quiet server in the same run (the ratio the isolation issue asks to stay <= 1.5).

    /opt/paddock/venv/bin/python -m bench.neighbours                 # 30 s per attack
    /opt/paddock/venv/bin/python -m bench.neighbours --seconds 10    # a quicker look

Attacks (each from a fresh box, as its root, for the whole window): keyrings, inotify
instances and watches, a fork bomb, every CPU it may use, its memory limit, its disk
(written and synced), and /proc reads through LXCFS. The server is one of its own; every
box it makes is removed at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.harness import Server

from paddock import Client

from ._table import Row, print_table

TOOLS = Path(__file__).resolve().parents[1] / "tests" / "integration" / "hostile" / "boxtools.py"
TYPES = {"tiny": {"cpus": 1, "memory_mb": 512, "pids": 512, "disk_mb": 1024}}
# What each attack runs in the box, in the background, until the box is deleted.
ATTACKS: dict[str, str] = {
    "keyrings": "while :; do python3 /tmp/boxtools.py keys 1000 >/dev/null; done",
    "inotify": "python3 /tmp/boxtools.py inotify 1 & "
    "python3 -c 'import ctypes,os;l=ctypes.CDLL(None);fd=l.inotify_init1(0);"
    '[l.inotify_add_watch(fd, f"/tmp/w{i}".encode(), 0xfff) for i in range(9999) '
    'if not os.mkdir(f"/tmp/w{i}")];import time;time.sleep(1e6)\'',
    "fork bomb": "b() { b | b & }; b",
    "cpu": "for i in 1 2 3 4; do (while :; do :; done) & done",
    "memory": "python3 -c 'x=[];\nwhile True: x.append(bytearray(1<<20))'",
    "disk": "while :; do dd if=/dev/zero of=/config/fill bs=1M count=512 conv=fsync "
    "2>/dev/null; rm -f /config/fill; done",
    "lxcfs /proc reads": "for i in 1 2 3 4; do (while :; do cat /proc/meminfo /proc/cpuinfo "
    "/proc/stat /proc/uptime >/dev/null; done) & done",
}


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure(
    srv: Server, c: Client, victim: str, seconds: float, names: Callable[[], str]
) -> tuple[float, float]:
    """(exec true p99, median create -> first exec) over `seconds`."""
    execs: list[float] = []
    creates: list[float] = []
    stop = threading.Event()

    def creating() -> None:
        with srv.client() as own:
            while not stop.is_set():
                name = names()
                began = time.perf_counter()
                own.create_box(name, box_type="tiny", ttl=600)
                own.exec(name, ["true"])
                creates.append(time.perf_counter() - began)
                own.delete_box(name, force=True)

    maker = threading.Thread(target=creating, daemon=True)
    maker.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        began = time.perf_counter()
        c.exec(victim, ["true"])
        execs.append(time.perf_counter() - began)
        time.sleep(0.05)
    stop.set()
    maker.join()
    return p99(execs), statistics.median(creates) if creates else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="per attack")
    parser.add_argument("--only", action="append", help="run only these attacks")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    srv = Server(work / "neighbours", types=TYPES, capacity_cpus=64, capacity_memory_mb=65536)
    counter = iter(range(100_000))

    def names() -> str:
        return f"nb-{next(counter)}-{uuid.uuid4().hex[:4]}"

    rows: list[Row] = []
    try:
        with srv.client() as c:
            victim = names()
            c.create_box(victim, box_type="tiny", ttl=3600)
            c.exec(victim, ["true"])
            quiet_exec, quiet_create = measure(srv, c, victim, args.seconds, names)
            rows.append(Row("quiet: exec true p99", quiet_exec, None, "s", "report"))
            rows.append(Row("quiet: create -> first exec", quiet_create, None, "s", "report"))
            for attack, script in ATTACKS.items():
                if args.only and attack not in args.only:
                    continue
                attacker = names()
                c.create_box(attacker, box_type="tiny", ttl=3600)
                c.push(attacker, [str(TOOLS)], "/tmp")
                detached = 'setsid sh -c "$0" >/dev/null 2>&1 </dev/null &'
                c.exec(attacker, ["sh", "-c", detached, script], user="root")
                time.sleep(3)  # the attack takes hold
                noisy_exec, noisy_create = measure(srv, c, victim, args.seconds, names)
                rows.append(
                    Row(f"{attack}: exec true p99", noisy_exec, quiet_exec, "s", "ratio <= 1.5")
                )
                rows.append(
                    Row(
                        f"{attack}: create -> first exec",
                        noisy_create,
                        quiet_create,
                        "s",
                        "ratio <= 1.5",
                    )
                )
                c.delete_box(attacker, force=True)
            c.delete_box(victim, force=True)
    finally:
        srv.close()
    print_table(f"Noisy neighbours: another box attacks for {args.seconds:.0f} s each", rows)


if __name__ == "__main__":
    main()
