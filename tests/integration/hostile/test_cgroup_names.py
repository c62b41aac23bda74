"""A box names the cgroups it makes inside its own as it likes, another box's container id
among them. The network guard keeps a box's init pid only for a process in that box's own
cgroup (netpolicy/inits.py): a process planted in a cgroup named after the victim's
container is still the attacker's, so the victim's address is never bound to the
attacker's bridge port through it."""

from __future__ import annotations

from pathlib import Path

import docker

from paddockd.netpolicy.inits import first_container, in_container

from ...harness import ENGINE_SOCKET
from ..conftest import Server

PLANT = (
    "set -e; sleep 300 & pid=$!; planted=0; "
    "for d in /sys/fs/cgroup/*/; do "
    '  mkdir -p "$d$1" 2>/dev/null && echo $pid > "$d$1/cgroup.procs" 2>/dev/null '
    "  && planted=$((planted + 1)) || true; "
    "done; echo $planted"
)


def container_of(server: Server, name: str) -> tuple[str, int]:
    with server.client() as c:
        box_id = c.get_box(name).id
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    (row,) = api.containers(filters={"label": f"paddock.box={box_id}"})
    return str(row["Id"]), int(api.inspect_container(row["Id"])["State"]["Pid"])


def test_a_cgroup_named_after_another_box_makes_no_process_its_init(
    server: Server, box: str, other_box: str
) -> None:
    victim = other_box
    attacker_cid, _ = container_of(server, box)
    victim_cid, victim_init = container_of(server, victim)
    with server.client() as c:
        got = c.exec(box, ["sh", "-c", PLANT, "sh", victim_cid], user="root")
    assert got.exit_code == 0 and int(got.stdout.split()[-1]) > 0, got.stderr
    planted = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and f"/{attacker_cid}/{victim_cid}" in _cgroups(p)
    ]
    assert planted, "the box could not make the cgroup: nothing was tested"
    for pid in planted:
        assert first_container(_cgroups(Path(f"/proc/{pid}"))) == attacker_cid
        assert not in_container(pid, victim_cid)
        assert in_container(pid, attacker_cid)
    assert in_container(victim_init, victim_cid)
    with server.client() as c:  # the victim still has its network, the attacker too
        assert c.exec(victim, ["true"]).exit_code == 0
        assert c.exec(box, ["pkill", "-f", "sleep 300"], user="root").exit_code in (0, 1)


def _cgroups(proc: Path) -> str:
    try:
        return (proc / "cgroup").read_text()
    except OSError:
        return ""
