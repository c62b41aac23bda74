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


def _nsid_of(pid: int) -> int:
    from paddockd.netpolicy.rtnetlink import NamespaceIds

    with NamespaceIds() as ids:
        found = ids.of(pid)
    assert found is not None
    return found


def test_a_port_is_found_from_its_namespace_alone_whatever_the_namespace_says(
    bridge: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One box's sync asks its namespace's links which host link is their peer, and takes
    one only if the host says it is a port of the bridge leading there: links the box
    makes, even one naming another port's index, change nothing."""
    import socket

    from paddockd.netpolicy import nftables, rtnetlink

    tag = bridge.removeprefix("pdtbr")
    ns = f"pdtest-ns-{tag}"
    init = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "60"])
    master = socket.if_nametoindex(bridge)
    try:
        ports.bridge_ports(bridge)  # the far namespace gets its number, as a sync's dump does
        for _ in range(50):  # until `ip netns exec` has joined the namespace
            if ip("netns", "pids", ns).split():
                break
            time.sleep(0.05)
        nsid = _nsid_of(init.pid)
        found = rtnetlink.port_into(master, nsid)
        assert found is not None and found.name == f"pdth1{tag}" and found.netnsid == nsid
        # The box's own links, one of them naming the other port's index as its peer.
        other = socket.if_nametoindex(f"pdth0{tag}")
        ip("-n", ns, "link", "add", "pdtx0", "index", str(other), "type", "veth", "peer", "pdtx1")
        ip("-n", ns, "link", "add", "pdtv0", "type", "veth", "peer", "name", "pdtv1")
        again = rtnetlink.port_into(master, nsid)
        assert again is not None and again.name == f"pdth1{tag}"
        assert rtnetlink.port_into(master, nsid + 1000) is None  # no such namespace
        # The policy's one-box path takes it so, without listing the bridge's ports.
        net = NftablesPolicy(bridge, "10.250.77.1/28", pid_of=lambda cid: init.pid)
        box = BoxAddress("b1", "10.250.77.2", policy("allow-all"), "c1", "02:42:0a:fa:4d:02")
        with monkeypatch.context() as m:
            m.setattr(nftables, "bridge_ports", lambda b: pytest.fail("listed every port"))
            assert net._port_of(box, None, {}) == f"pdth1{tag}"
        assert {p.name: p.isolated for p in ports.bridge_ports(bridge)}[f"pdth1{tag}"]
        # More links than are read: the port is not among them, and every port is listed.
        for i in range(rtnetlink.PEER_LINKS):
            ip("-n", ns, "link", "add", f"pdtm{i}", "type", "veth", "peer", "name", f"pdtn{i}")
        assert rtnetlink.port_into(master, nsid) is None
        assert net._port_of(box, None, {}) == f"pdth1{tag}"
    finally:
        init.kill()
        init.wait()
