"""Paddock beside a system Docker (what `apt install docker.io` brings on a VPS): Docker's
iptables FORWARD policy is DROP, so boxes only keep their network because paddockd
accepts its bridge in DOCKER-USER. When no system Docker runs here, the test starts a real
one (its own data root and socket, Docker's default bridge and iptables rules) and puts
the machine's iptables back exactly as they were afterwards."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..netlab import ALLOWED, OTHER, TestInternet
from .conftest import Server
from .test_network import assert_reaches, connect, set_policy


def iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def system_docker() -> Iterator[None]:
    if iptables("-S", "DOCKER-USER").returncode == 0:
        yield  # a real system Docker already runs here: test beside it
        return
    saved = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    had_docker0 = Path("/sys/class/net/docker0").exists()
    root = Path(tempfile.mkdtemp(prefix="pdt-sysdocker-"))
    sock = root / "docker.sock"
    with open(root / "dockerd.log", "wb") as log:
        proc = subprocess.Popen(
            [
                "dockerd",
                f"--data-root={root / 'data'}",
                f"--exec-root={root / 'exec'}",
                f"--pidfile={root / 'dockerd.pid'}",
                f"--host=unix://{sock}",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while iptables("-S", "DOCKER-USER").returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "system dockerd did not start:\n" + (root / "dockerd.log").read_text()[-2000:]
                )
            time.sleep(0.5)
        # What Docker does on a VPS where forwarding was off before it came.
        iptables("-P", "FORWARD", "DROP")
        yield
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        for table in ("filter", "nat"):
            iptables("-t", table, "-F")
            iptables("-t", table, "-X")
        iptables("-P", "FORWARD", "ACCEPT")
        subprocess.run(["iptables-restore"], input=saved, text=True, check=False)
        if not had_docker0:
            subprocess.run(["ip", "link", "del", "docker0"], capture_output=True)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_boxes_keep_their_network_and_policy_beside_a_system_docker(
    system_docker: None, server: Server, box: str, internet: TestInternet
) -> None:
    assert "-P FORWARD DROP" in iptables("-S", "FORWARD").stdout
    deadline = time.monotonic() + 40  # paddockd looks for DOCKER-USER every 20 s
    while iptables("-C", "DOCKER-USER", "-i", server.bridge, "-j", "ACCEPT").returncode != 0:
        assert time.monotonic() < deadline, "paddockd did not accept its bridge in DOCKER-USER"
        time.sleep(1)
    internet.reset()
    assert_reaches(server, box, ALLOWED, internet)
    set_policy(server, box, "allow", "allowed.test")
    assert_reaches(server, box, "allowed.test", internet)
    assert not connect(server, box, OTHER)[0]
    assert internet.connections(OTHER) == []
    set_policy(server, box, "allow-all")
