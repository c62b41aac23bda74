"""The fault suite: paddockd killed (SIGKILL) at each named step of create, stop, resume,
snapshot, fork, restore, push, pull, drive create/delete and a network change, then
restarted; and the instance's nftables tables deleted under a running server. After each:
the reconciler converges, no box and no acknowledged file is lost, the policy is back in
the kernel, and `paddock status` has no problems (tests/faultlab.py says how each is read).

An engine restart (every box stops and comes back) is covered by
test_network.py::test_policy_survives_an_engine_restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..dnsstub import DnsStub
from ..faultlab import SCENARIOS, Lab, Scenario, close_lab, open_lab, run
from ..harness import Server

# Seconds a converge may take after a restart: start-up, then a pass or two (every 2 s).
CONVERGED_WITHIN = 30


@pytest.fixture(scope="module")
def lab(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[Lab]:
    # One server and one standing box for every fault: each scenario brings the box to the
    # state it needs, and every file acknowledged so far is checked after every fault.
    srv = Server(workdir / "faults", upstream_dns=dns_stub.address, image_sweep_grace=3)
    made = open_lab(srv)
    yield made
    close_lab(made)
    srv.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_fault(lab: Lab, scenario: Scenario) -> None:
    outcome = run(lab, scenario)
    assert outcome.lost == [], f"{scenario.name}: lost {outcome.lost}"
    assert outcome.converged_s < CONVERGED_WITHIN, outcome
    assert lab.keep in lab.box_names()
