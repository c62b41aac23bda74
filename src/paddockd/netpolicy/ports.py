"""Which port of Paddock's bridge belongs to which box, learned from the kernel alone.

A box is root in its own network namespace: it can rename, re-address and add interfaces
there, so nothing it reports is trusted. The host side is: the bridge's ports are veth
ends in the host's namespace, and the kernel tells, for each, the id (in the host's view)
of the namespace holding the other end (`link_netnsid`). The namespace of a box's init
process (its pid comes from the engine) gets its id through one netlink request. A box
cannot create or move an interface into the host's namespace, so a port found this way is
the one Docker attached for it.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..domain.errors import IsolationFailed
from . import rtnetlink


@dataclass(frozen=True)
class Port:
    name: str
    netnsid: int | None  # the far end's namespace, in the host's numbering
    isolated: bool


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def bridge_ports(bridge: str) -> list[Port]:
    """The bridge's ports. Listing them also makes the kernel number the far ends'
    namespaces, which `rtnetlink.NamespaceIds` then reads."""
    try:
        links = rtnetlink.ports_of(socket.if_nametoindex(bridge))
    except OSError as exc:
        raise IsolationFailed(f"cannot list the ports of bridge {bridge}: {exc}") from None
    return [Port(link.name, link.netnsid, link.isolated) for link in links]


def isolate(port: str) -> None:
    """Bridge port isolation: isolated ports never exchange frames with each other. (The
    name is the kernel's, of a link in the host's namespace: no box chooses it.)"""
    try:
        (Path("/sys/class/net") / port / "brport" / "isolated").write_text("1\n")
    except FileNotFoundError:
        return  # gone since it was listed (its box deleted its end of the pair): no port
    except OSError as exc:
        raise IsolationFailed(f"cannot isolate bridge port {port}: {exc}") from None


def stable_mac(bridge: str) -> str:
    """A locally administered unicast MAC derived from the bridge's name."""
    digest = hashlib.sha256(bridge.encode()).digest()
    return "0a:" + ":".join(f"{b:02x}" for b in digest[:5])


def pin_bridge(bridge: str) -> str:
    """Give the bridge a fixed MAC (a Linux bridge otherwise takes its lowest port's, which
    changes as boxes come and go, and the rules name it), strict reverse-path filtering
    and no IPv6. Returns the MAC."""
    sysfs = Path("/sys/class/net") / bridge
    mac = stable_mac(bridge)
    if (sysfs / "address").read_text().strip() != mac:
        done = _ip("link", "set", "dev", bridge, "address", mac)
        if done.returncode != 0:
            raise IsolationFailed(f"cannot set the MAC of bridge {bridge}: {done.stderr.strip()}")
    # Boxes are IPv4-only: the host has no IPv6 address a box could reach on the bridge.
    for path, value in (
        (Path("/proc/sys/net/ipv4/conf") / bridge / "rp_filter", "1"),
        (Path("/proc/sys/net/ipv6/conf") / bridge / "disable_ipv6", "1"),
    ):
        if path.exists() and path.read_text().strip() != value:
            path.write_text(value + "\n")
    return mac


def host_networks(bridge: str) -> list[str]:
    """The host's own IPv4 addresses' networks, except the boxes' bridge (its own rules
    guard it)."""
    try:
        skip: int | None = socket.if_nametoindex(bridge)
    except OSError:
        skip = None
    try:
        return rtnetlink.ipv4_networks(skip)
    except OSError as exc:
        # Not an empty list: the networks left out would be left open to the boxes.
        raise IsolationFailed(f"cannot list the host's addresses: {exc}") from None
