"""Warm pool benchmark: create -> exec-ready with the pool warm and with none, against
`docker run -d` + `docker exec` on the same engine, in the same run.

    /opt/paddock/venv/bin/python -m bench.pool [--runs 10]

Needs the box engine and image (./install.sh). Starts two paddockd of its own: one keeping
two ready small boxes, one without a pool (the cold side).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.harness import IMAGE, PADDOCK, Server

from paddock import Client

from ._table import Row, median_seconds, print_table
from .core import DOCKER, DOCKER_ENV, LIMITS, sh

POOL = 2


def pool_full(c: Client) -> bool:
    pool = c.status().pool
    return pool is not None and all(t.ready == t.size and not t.making for t in pool.types)


def warm(c: Client, calm: float) -> None:
    """Wait for a full pool, then for the newest ready box's start-up to be over: a warm
    pool is a quiet one."""
    deadline = time.monotonic() + 120
    while not pool_full(c):
        if time.monotonic() > deadline:
            raise RuntimeError("the pool did not fill within 2 minutes")
        time.sleep(0.1)
    time.sleep(calm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calm", type=float, default=2.0, help="seconds after the pool fills")
    args = parser.parse_args()
    runs = args.runs
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    hot = Server(work / "warm", pool_types={"small": POOL}, pool_refill_delay=0.2)
    cold = Server(work / "cold")
    raw_name = f"pdbench-{uuid.uuid4().hex[:6]}"
    names = iter(f"bench-{i}" for i in range(10_000))
    last: list[str] = []
    rows: list[Row] = []
    try:
        with hot.client() as h, cold.client() as k:

            def raw() -> None:
                sh(DOCKER, "run", "-d", "--name", raw_name, *LIMITS, IMAGE, env=DOCKER_ENV)
                sh(DOCKER, "exec", raw_name, "true", env=DOCKER_ENV)

            def raw_cleanup() -> None:
                sh(DOCKER, "rm", "-f", raw_name, env=DOCKER_ENV)

            def sdk(c: Client) -> Callable[[], None]:
                def create() -> None:
                    last.append(next(names))
                    c.create_box(last[-1], ttl=600)
                    c.exec(last[-1], ["true"])

                return create

            def cli(srv: Server) -> Callable[[], None]:
                def create() -> None:
                    last.append(next(names))
                    sh(PADDOCK, "new", "--name", last[-1], "--ttl", "600", env=srv.env)
                    sh(PADDOCK, "exec", last[-1], "--", "true", env=srv.env)

                return create

            def claim_only() -> None:
                last.append(next(names))
                h.create_box(last[-1], ttl=600)

            def remove(c: Client) -> Callable[[], None]:
                return lambda: c.delete_box(last[-1], force=True)

            def calm_hot() -> None:
                warm(h, args.calm)

            def calm_cold() -> None:
                time.sleep(args.calm)  # the last delete's cleanup done, as on the warm side

            r = median_seconds(raw, runs, setup=calm_cold, teardown=raw_cleanup)
            timed = [
                ("warm pool, SDK create_box + exec true", sdk(h), h, calm_hot, "ratio <= 0.5"),
                ("warm pool, CLI new + exec true", cli(hot), h, calm_hot, "ratio <= 1.0"),
                ("no pool, SDK create_box + exec true", sdk(k), k, calm_cold, "report"),
                ("no pool, CLI new + exec true", cli(cold), k, calm_cold, "ratio <= 1.5"),
            ]
            for metric, fn, c, calm, target in timed:
                p = median_seconds(fn, runs, setup=calm, teardown=remove(c))
                rows.append(Row(f"create -> exec-ready, {metric}", p, r, "s", target))
            p = median_seconds(claim_only, runs, setup=calm_hot, teardown=remove(h))
            rows.append(Row("warm pool, SDK create_box alone (a claim)", p, None, "s", "report"))
    finally:
        subprocess.run([DOCKER, "rm", "-f", raw_name], env=DOCKER_ENV, capture_output=True)
        hot.close()
        cold.close()
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        f"Warm pool vs docker run -d + docker exec (median of {runs} runs; "
        f"{os.cpu_count()} CPUs; pool of {POOL} small boxes)",
        rows,
    )


if __name__ == "__main__":
    main()
