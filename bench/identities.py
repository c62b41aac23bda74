"""Hundreds of running boxes, each its own identity on the host: N cheap boxes start (a
tiny type, the shared image), each answers `exec`, and each runs on a host uid range of
its own, so no per-uid kernel budget is shared (the 200-key keyring quota of one shared
uid would have refused them near 200).

    /opt/paddock/venv/bin/python -m bench.identities              # 300 boxes (~10 min)
    /opt/paddock/venv/bin/python -m bench.identities --boxes 50

A server of its own, no warm pool; every box it makes is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
from tests.harness import ENGINE_SOCKET, Server

from ._table import Row, print_table

TYPES = {"speck": {"cpus": 0.1, "memory_mb": 96, "pids": 128, "disk_mb": 256}}


def key_users() -> dict[int, int]:
    """Keys held per host uid (/proc/key-users)."""
    held = {}
    for line in Path("/proc/key-users").read_text().splitlines():
        uid, _, rest = line.partition(":")
        held[int(uid)] = int(rest.split()[1].split("/")[0])
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boxes", type=int, default=300)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    # A bridge of a /20: a test server's own /24 holds 253 boxes.
    srv = Server(
        work / "identities",
        types=TYPES,
        capacity_cpus=4096,
        capacity_memory_mb=1 << 20,
        network_bridge_cidr="10.216.0.1/20",
    )
    names = [f"id-{i}-{uuid.uuid4().hex[:4]}" for i in range(args.boxes)]
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    rows: list[Row] = []
    try:

        def start(name: str) -> float:
            with srv.client() as c:
                began = time.perf_counter()
                c.create_box(name, box_type="speck", ttl=3600)
                return time.perf_counter() - began

        began = time.perf_counter()
        with ThreadPoolExecutor(args.parallel) as pool:
            creates = list(pool.map(start, names))
        all_up = time.perf_counter() - began

        def answers(name: str) -> float:
            with srv.client() as c:
                t = time.perf_counter()
                assert c.exec(name, ["true"]).exit_code == 0
                return time.perf_counter() - t

        with ThreadPoolExecutor(args.parallel) as pool:
            execs = list(pool.map(answers, names))
        uids = set()
        for info in srv.containers():
            pid = api.inspect_container(info["Id"])["State"]["Pid"]
            status = Path(f"/proc/{pid}/status").read_text()
            uids.add(
                int(next(ln.split()[2] for ln in status.splitlines() if ln.startswith("Uid:")))
            )
        assert srv.proc is not None
        rss = next(
            int(ln.split()[1]) // 1024
            for ln in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines()
            if ln.startswith("VmRSS:")
        )
        held = key_users()
        rows += [
            Row("boxes running, each answering exec", len(execs), None, "n", f"= {args.boxes}"),
            Row("distinct host identities among them", len(uids), None, "n", f"= {args.boxes}"),
            Row(
                "most keys held by one box's uid",
                max(held.get(u, 0) for u in uids),
                None,
                "n",
                "< 200",
            ),
            Row("all started (wall)", all_up, None, "s", "report"),
            Row("create, median", statistics.median(creates), None, "s", "report"),
            Row("exec true, median", statistics.median(execs), None, "s", "report"),
            Row("exec true, max", max(execs), None, "s", "report"),
            Row("paddockd RSS with them all", rss, None, "MiB", "report"),
            Row("host memory available", _available_mib(), None, "MiB", "report"),
        ]
    finally:
        srv.close()
    print_table(f"{args.boxes} boxes, one identity each ({os.cpu_count()} CPUs)", rows)


def _available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


if __name__ == "__main__":
    main()
