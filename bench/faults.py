"""Fault benchmark: paddockd killed at every named point of every operation (the fault
suite's scenarios, tests/faultlab.py), its nftables tables deleted, and the whole host
side restarted under 10 boxes (5 running, 5 stopped); how long each takes to converge,
and what was lost (must be 0).

    /opt/paddock/venv/bin/python -m bench.faults
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tests.dnsstub import DnsStub
from tests.faultlab import SCENARIOS, Lab, Outcome, close_lab, open_lab, run
from tests.harness import Server


def host_restart(lab: Lab, boxes: int) -> Outcome:
    """kill -9 of paddockd with `boxes` more boxes, half of them stopped, each holding an
    acknowledged file; then a start and a converge."""
    with lab.client() as c:
        for n in range(boxes):
            c.create_box(f"fleet{n}", ttl=0)
            lab.ack(f"fleet{n}")
        for n in range(0, boxes, 2):
            c.stop_box(f"fleet{n}")
    lab.srv.kill()
    seconds = lab.restart()
    name = f"host side restarted, {boxes} boxes (half stopped)"
    return Outcome(name, seconds, lab.lost(), lab.acked_count)


def print_table(outcomes: list[Outcome]) -> None:
    width = max(len(o.scenario) for o in outcomes)
    header = f"{'fault':<{width}}  {'converged in':>12}  {'data lost':>9}  {'acked files':>11}"
    print(f"\n{header}\n{'-' * len(header)}")
    for o in outcomes:
        print(f"{o.scenario:<{width}}  {o.converged_s:>10.1f} s  {len(o.lost):>9}  {o.checked:>11}")
        for what in o.lost:
            print(f"    lost: {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boxes", type=int, default=10, help="boxes for the host restart")
    args = parser.parse_args()
    stub = DnsStub()
    srv = Server(
        Path(tempfile.mkdtemp(prefix="paddock-bench-")) / "server",
        upstream_dns=stub.address,
        image_sweep_grace=3,
    )
    lab = open_lab(srv)
    outcomes = []
    try:
        for scenario in SCENARIOS:
            outcomes.append(run(lab, scenario))
            print(f"{scenario.name}: {outcomes[-1].converged_s:.1f} s", flush=True)
        outcomes.append(host_restart(lab, args.boxes))
    finally:
        close_lab(lab)
        srv.close()
        stub.close()
    print_table(outcomes)


if __name__ == "__main__":
    main()
