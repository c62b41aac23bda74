"""The network guard's netlink questions against the real kernel, on links of the test's
own (a bridge with two veth ports, one's far end in a namespace of its own), compared
with what `ip` says of the same links."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from paddockd.domain.errors import IsolationFailed
from paddockd.domain.network import policy
from paddockd.netpolicy import ports
from paddockd.netpolicy.base import BoxAddress
from paddockd.netpolicy.nftables import NftablesPolicy


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def bridge() -> Iterator[str]:
    tag = uuid.uuid4().hex[:6]
    br, ns = f"pdtbr{tag}", f"pdtest-ns-{tag}"
    try:
        ip("link", "add", br, "type", "bridge")
        ip("netns", "add", ns)
        for i in (0, 1):
            ip("link", "add", f"pdth{i}{tag}", "type", "veth", "peer", "name", f"pdtb{i}{tag}")
            ip("link", "set", f"pdth{i}{tag}", "master", br)
        ip("link", "set", f"pdtb1{tag}", "netns", ns)
        ip("addr", "add", "10.250.77.1/28", "dev", br)
        yield br
    finally:
        for i in (0, 1):
            subprocess.run(["ip", "link", "del", f"pdth{i}{tag}"], capture_output=True)
        subprocess.run(["ip", "link", "del", br], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_bridge_ports_and_their_far_namespaces_as_ip_says(bridge: str) -> None:
    found = ports.bridge_ports(bridge)
    said = json.loads(ip("-j", "-d", "link", "show", "master", bridge))
    assert sorted((p.name, p.netnsid, p.isolated) for p in found) == sorted(
        (
            r["ifname"],
            r.get("link_netnsid"),
            bool(r["linkinfo"]["info_slave_data"].get("isolated")),
        )
        for r in said
    )
    assert len(found) == 2 and sum(p.netnsid is not None for p in found) == 1
    port = found[0].name
    ports.isolate(port)
    assert {p.name: p.isolated for p in ports.bridge_ports(bridge)}[port] is True


def test_host_networks_skip_the_bridge_alone(bridge: str) -> None:
    def said(dev: str) -> set[str]:
        rows = json.loads(ip("-j", "-4", "addr", "show", "dev", dev))
        return {f"{a['local']}/{a['prefixlen']}" for r in rows for a in r.get("addr_info", [])}

    # Only the test's own bridge and loopback: other addresses may change meanwhile.
    found = set(ports.host_networks(bridge))
    assert said("lo") <= found and "127.0.0.1/8" in found
    assert said(bridge) == {"10.250.77.1/28"}
    assert not said(bridge) & found
    assert "10.250.77.1/28" in ports.host_networks("pdt-none")


def test_a_missing_bridge_is_a_clear_failure() -> None:
    with pytest.raises(IsolationFailed, match="pdt-none"):
        ports.bridge_ports("pdt-none")


def test_a_box_is_bound_by_its_init_and_asked_for_again_once_it_exits(bridge: str) -> None:
    """A kept pid is the box's only while its init lives: afterwards the number can go to
    another box's process, whose port the box must never be bound to."""
    tag = bridge.removeprefix("pdtbr")
    init = subprocess.Popen(["ip", "netns", "exec", f"pdtest-ns-{tag}", "sleep", "60"])
    asked: list[str] = []

    def pid_of(cid: str) -> int:
        asked.append(cid)
        return init.pid if init.poll() is None else 0

    net = NftablesPolicy(bridge, "10.250.77.1/28", pid_of=pid_of)
    box = BoxAddress("b1", "10.250.77.2", policy("allow-all"), "c1", "02:42:0a:fa:4d:02")
    try:
        for _ in range(50):  # until `ip netns exec` has joined the namespace
            if net._bind([box], ports.bridge_ports(bridge))[0]:
                break
            time.sleep(0.05)
        assert asked  # the engine was asked for the init once at least
        asked.clear()
        for _ in range(2):
            assert net._bind([box], ports.bridge_ports(bridge)) == ({box.ip: f"pdth1{tag}"}, {})
        assert asked == []  # kept while it lives
    finally:
        init.kill()
        init.wait()
    bound, failed = net._bind([box], ports.bridge_ports(bridge))
    assert asked and bound == {} and "0 ports" in failed["b1"]  # asked anew
