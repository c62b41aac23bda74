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
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class Case:
    name: str
    fn: Callable[[], object]
    setup: Callable[[], object]
    teardown: Callable[[], object]
    samples: list[float] = field(default_factory=list)

    def sample(self) -> None:
        self.samples.append(median_seconds(self.fn, 1, self.setup, self.teardown))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


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

            def remove(srv: Server, c: Client) -> Callable[[], None]:
                def gone() -> None:
                    c.delete_box(last[-1], force=True)
                    srv.deleted()  # as raw_cleanup's `docker rm -f` waits for its removal

                return gone

            def calm() -> None:
                # Every case starts with the warm server's pool full and quiet, so no refill
                # weighs on a measurement of another case.
                warm(h, args.calm)

            cases = [
                Case("raw", raw, calm, raw_cleanup),
                Case("create+exec, warm pool, SDK", sdk(h), calm, remove(hot, h)),
                Case("create+exec, warm pool, CLI new+exec", cli(hot), calm, remove(hot, h)),
                Case("create+exec, no pool, SDK", sdk(k), calm, remove(cold, k)),
                Case("create+exec, no pool, CLI new+exec", cli(cold), calm, remove(cold, k)),
                Case("claim alone (SDK create_box, warm pool)", claim_only, calm, remove(hot, h)),
            ]
            # Interleaved, round by round: whatever else loads the machine meanwhile weighs
            # on both sides of every ratio alike.
            for _ in range(runs):
                for case in cases:
                    case.sample()
            r = cases[0].median
            targets = ["ratio <= 0.5", "ratio <= 1.0", "report", "ratio <= 1.5"]
            for case, target in zip(cases[1:5], targets, strict=True):
                rows.append(Row(case.name, case.median, r, "s", target))
            rows.append(Row(cases[5].name, cases[5].median, None, "s", "report"))
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
