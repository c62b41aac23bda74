"""A hostile box against the network rules: each test is an attack run as root inside a
real box, and each asserts that the attack failed *and* that nothing arrived where it
aimed (a packet recorder in the on-machine test internet, a listener in another box, the
host's neighbour table). Traffic goes only to the test's own namespace, the test's boxes
and the host's side of the test bridge."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from ...netlab import (
    ALIBABA_METADATA,
    ALLOWED,
    AZURE_METADATA,
    LINK_NS,
    PRIVATE,
    TestInternet,
)
from ..conftest import ENGINE_SOCKET, Server

TOOLS = Path(__file__).with_name("boxtools.py").read_text()


@pytest.fixture(scope="module")
def packets(internet: TestInternet) -> Path:
    return internet.sniff()


@pytest.fixture
def make_box(server: Server) -> Iterator[object]:
    made: list[str] = []

    def create(*network: str) -> str:
        name = f"h-{uuid.uuid4().hex[:8]}"
        server.cli("new", "--name", name, "--ttl", "900", *network, check=True)
        made.append(name)
        server.cli(
            "exec",
            "-i",
            name,
            "--",
            "sh",
            "-c",
            "cat > /tmp/boxtools.py",
            stdin=TOOLS.encode(),
            check=True,
        )
        return name

    yield create
    for name in made:
        server.cli("rm", "--force", name)


def attack(server: Server, box: str, *args: str) -> str:
    done = server.cli("exec", "-u", "root", box, "--", "python3", "/tmp/boxtools.py", *args)
    return done.stdout + done.stderr


def root(server: Server, box: str, script: str) -> str:
    return server.sh(box, script, user="root")


def engine_view(server: Server, box: str) -> tuple[str, str]:
    """The box's address and MAC as the engine gave them (not as the box says)."""
    with server.client() as c:
        box_id = c.get_box(box).id
    data = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}").inspect_container(
        f"paddock-{box_id}"
    )
    net = next(iter(data["NetworkSettings"]["Networks"].values()))
    return str(net["IPAddress"]), str(net["MacAddress"])


def arrived(log: Path, port: int) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [r for r in rows if r["port"] == port]


def spoofed_count(server: Server) -> int:
    table = "paddock_" + server.instance.replace("-", "_")
    out = subprocess.run(
        ["nft", "-j", "list", "counter", "bridge", table, "spoofed"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counter = next(r["counter"] for r in json.loads(out)["nftables"] if "counter" in r)
    return int(counter["packets"])


def spare_address(server: Server) -> str:
    return str(ipaddress.ip_interface(f"{server.gateway}/24").network[250])


def test_an_added_address_gets_nothing_out(server: Server, make_box: object, packets: Path) -> None:
    """The review's repro: `ip addr add` in a deny-all box, then TCP, UDP and ICMP from it."""
    box = make_box("--network", "deny-all")  # type: ignore[operator]
    spare = spare_address(server)
    before = spoofed_count(server)
    root(server, box, f"ip addr add {spare}/24 dev eth0")
    out = attack(server, box, "connect", spare, ALLOWED, "4711")
    attack(server, box, "send", spare, ALLOWED, "icmp", "4712")
    assert "connected" not in out
    time.sleep(1)
    assert arrived(packets, 4711) == [] and arrived(packets, 4712) == []
    counted = spoofed_count(server)
    assert counted > before
    # A policy change rewrites the tables: what was counted stays counted.
    server.cli("network", box, "allow", "allowed.test", check=True)
    assert spoofed_count(server) >= counted


def test_forged_outside_sources_never_leave(
    server: Server, make_box: object, packets: Path
) -> None:
    box = make_box()  # type: ignore[operator]
    for i, proto in enumerate(("tcp", "udp", "icmp")):
        attack(server, box, "send", "198.18.77.77", ALLOWED, proto, str(4721 + i))
    time.sleep(1)
    assert [arrived(packets, 4721 + i) for i in range(3)] == [[], [], []]


def test_a_box_cannot_pass_for_another(server: Server, make_box: object, packets: Path) -> None:
    """A deny-all box takes an allow-all box's address and MAC: still nothing gets out,
    and the host keeps the victim's MAC for the victim's address."""
    victim = make_box()  # type: ignore[operator]
    thief = make_box("--network", "deny-all")  # type: ignore[operator]
    victim_ip, victim_mac = engine_view(server, victim)
    thief_ip, thief_mac = engine_view(server, thief)
    server.cli("exec", victim, "--", "getent", "hosts", "allowed.test")  # host learns it
    time.sleep(1.5)  # past the neighbour table's lock time
    attack(server, thief, "arp", "eth0", thief_mac, victim_ip, server.gateway)
    neighbour = subprocess.run(
        ["ip", "neigh", "show", victim_ip, "dev", server.bridge], capture_output=True, text=True
    ).stdout
    assert thief_mac not in neighbour
    root(
        server,
        thief,
        f"ip link set eth0 down; ip link set eth0 address {victim_mac}; "
        f"ip addr flush dev eth0; ip addr add {victim_ip}/24 dev eth0; ip link set eth0 up; "
        f"ip route add default via {server.gateway}",
    )
    out = attack(server, thief, "connect", victim_ip, ALLOWED, "4731")
    attack(server, thief, "send", victim_ip, ALLOWED, "udp", "4732")
    assert "connected" not in out
    time.sleep(1)
    assert arrived(packets, 4731) == [] and arrived(packets, 4732) == []
    # The victim itself still gets out (the rule is about ports, not addresses).
    attack(server, victim, "connect", victim_ip, ALLOWED, "80")
    assert thief_ip != victim_ip


def test_boxes_cannot_reach_each_other_even_through_the_gateway(
    server: Server, make_box: object
) -> None:
    target = make_box("--network", "deny-all")  # type: ignore[operator]
    sender = make_box()  # type: ignore[operator]
    target_ip, _ = engine_view(server, target)
    server.sh(
        target,
        "setsid python3 /tmp/boxtools.py udplisten 4741 /tmp/got "
        ">/dev/null 2>&1 </dev/null & sleep 0.3",
    )
    time.sleep(0.5)
    attack(server, sender, "connect", "0.0.0.0", target_ip, "4741")  # straight over the bridge
    root(server, sender, f"ip route add {target_ip}/32 via {server.gateway}")
    attack(server, sender, "connect", "0.0.0.0", target_ip, "4741")  # routed by the host
    time.sleep(1)
    got = server.cli("exec", target, "--", "cat", "/tmp/got").stdout
    assert got == ""


@pytest.mark.parametrize(
    ("target", "why"),
    [
        (PRIVATE, "a private (RFC 1918) network"),
        (LINK_NS, "a network the host itself is on"),
        (ALIBABA_METADATA, "a metadata service"),
        (AZURE_METADATA, "a metadata service"),
    ],
)
def test_allow_all_means_the_public_internet(
    server: Server, make_box: object, internet: TestInternet, target: str, why: str
) -> None:
    box = make_box()  # type: ignore[operator]
    internet.reset()
    out = attack(server, box, "connect", "0.0.0.0", target, "80")
    assert "connected" not in out, why
    assert internet.connections(target) == [], why


def test_a_name_that_resolves_to_a_private_address_is_not_reached(
    server: Server, make_box: object, internet: TestInternet
) -> None:
    """DNS rebinding: an allowlisted name whose answer is a private address."""
    box = make_box("--allow", "private.test")  # type: ignore[operator]
    internet.reset()
    resolved = server.cli("exec", box, "--", "getent", "hosts", "private.test").stdout
    assert PRIVATE in resolved
    assert "connected" not in attack(server, box, "connect", "0.0.0.0", PRIVATE, "80")
    assert internet.connections(PRIVATE) == []


def test_ipv6_never_reaches_the_host(server: Server, make_box: object) -> None:
    box = make_box()  # type: ignore[operator]

    listener = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    listener.bind(("::", 0))
    listener.settimeout(2)
    port = listener.getsockname()[1]
    root(server, box, "sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0 || true")
    # All nodes on the link, and the host's bridge if it had a link-local address.
    attack(server, box, "udp6", "ff02::1", str(port))
    with pytest.raises(TimeoutError):
        listener.recvfrom(64)
    listener.close()
    bridge_v6 = Path(f"/proc/sys/net/ipv6/conf/{server.bridge}/disable_ipv6")
    assert bridge_v6.read_text().strip() == "1"


def test_links_a_box_makes_never_bind_it_to_another_boxs_port(
    server: Server, make_box: object
) -> None:
    """One box's sync finds its port from the links of the box's own namespace, which the
    box controls: the thief makes a link whose peer names the victim's host port (and a
    few others). The port found for the thief is still its own, and after the server
    syncs the thief (a policy change) both bindings are as the engine made them."""
    from paddockd.domain.network import policy
    from paddockd.netpolicy import nftables, ports, rtnetlink
    from paddockd.netpolicy.base import BoxAddress

    victim = make_box()  # type: ignore[operator]
    thief = make_box("--network", "deny-all")  # type: ignore[operator]
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")

    def container(box: str) -> tuple[str, int]:
        with server.client() as c:
            data = api.inspect_container(f"paddock-{c.get_box(box).id}")
        return str(data["Id"]), int(data["State"]["Pid"])

    def port_of(pid: int) -> str:
        with rtnetlink.NamespaceIds() as ids:
            nsid = ids.of(pid)
        (port,) = [p.name for p in ports.bridge_ports(server.bridge) if p.netnsid == nsid]
        return port

    thief_cid, thief_pid = container(thief)
    victim_port, thief_port = port_of(container(victim)[1]), port_of(thief_pid)
    index = socket.if_nametoindex(victim_port)
    root(
        server,
        thief,
        f"ip link add pdx0 index {index} type veth peer name pdx1; "
        "for i in 1 2 3; do ip link add pdy$i type veth peer name pdz$i; done",
    )
    assert f"{index}: pdx0" in root(server, thief, "ip -o link show pdx0")
    thief_ip, thief_mac = engine_view(server, thief)
    net = nftables.NftablesPolicy(server.bridge, f"{server.gateway}/24", pid_of=lambda c: 0)
    box = BoxAddress("t", thief_ip, policy("deny-all"), thief_cid, thief_mac, thief_pid)
    assert net._port_of(box, None, {}) == thief_port != victim_port
    server.cli("network", thief, "allow", "allowed.test", check=True)
    victim_ip, victim_mac = engine_view(server, victim)
    held = bound(server)
    assert held[victim_port] == (victim_mac, victim_ip)
    assert held[thief_port] == (thief_mac, thief_ip)


def bound(server: Server) -> dict[str, tuple[str, str]]:
    """The bridge table's port bindings: port -> (MAC, address)."""
    out = subprocess.run(
        ["nft", "-j", "list", "set", "bridge", server.table, "bound"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [r["set"] for r in json.loads(out)["nftables"] if "set" in r]
    found = {}
    for elem in rows[0].get("elem", []):
        port, mac, ip = elem.get("elem", elem)["concat"]
        found[str(port)] = (str(mac), str(ip))
    return found
