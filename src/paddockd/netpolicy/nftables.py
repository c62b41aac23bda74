"""Paddock's nftables tables, rewritten atomically from the desired state.

`inet paddock[_<instance>]` holds: egress NAT for the boxes' subnet; cloud metadata
refused for every box, first; the boxes' DNS redirected to Paddock's resolver and DNS to
anything else refused; per-box egress (deny-all, or an allowlist of IPv4 ranges plus the
addresses DNS answers for allowed names admitted for their TTL), keyed by the box's
address; and no way from a box to the host's own services. Box-to-box frames are switched
on the bridge and never reach the inet forward hook, so every port of the bridge is set
`isolated on` (isolated ports cannot talk to each other, only to the host side, which the
input chain guards). Refusals are resets/ICMP errors, not silent drops, so agents fail
fast. Connections already established may finish after a policy change (deny-all too).

New connections are counted per (box, address, protocol, port) in two dynamic sets, one
per verdict; reading them is how the egress log learns what boxes tried to reach.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
import time
from collections.abc import Iterable
from typing import Any

import anyio.to_thread

from .base import BoxAddress, Flow
from .libnft import Nft

# How often to look for a system Docker's DOCKER-USER chain (it may start after us).
DOCKER_CHECK_SECONDS = 20.0
# A short floor keeps a zero-TTL answer usable for the connection that asked for it.
MIN_ADMIT_SECONDS = 30
_SEEN = (
    "type ipv4_addr . ipv4_addr . inet_proto . inet_service; flags dynamic,timeout; "
    "timeout 1h; size 65536; counter;"
)
_SEEN_KEY = "ip saddr . ip daddr . meta l4proto . th dport"


def table_name(instance: str) -> str:
    return (
        "paddock" if instance == "default" else "paddock_" + re.sub(r"[^A-Za-z0-9_]", "_", instance)
    )


def _elements(items: Iterable[str]) -> str:
    listed = sorted(set(items))
    return f"elements = {{ {', '.join(listed)} }}" if listed else ""


def ruleset(
    table: str,
    bridge: str,
    bridge_cidr: str,
    dns_port: int,
    boxes: list[BoxAddress],
    learned: dict[tuple[str, str], int] | None = None,
) -> str:
    """The whole table. `learned` maps (box address, admitted address) to seconds left."""
    gateway = ipaddress.ip_interface(bridge_cidr)
    ips = [b.ip for b in boxes]
    deny = [b.ip for b in boxes if b.policy.mode == "deny-all"]
    listed = [b.ip for b in boxes if b.policy.mode == "allowlist"]
    ranges = [
        f"{b.ip} . {r}" for b in boxes if b.policy.mode == "allowlist" for r in b.policy.ranges
    ]
    tcp_udp = "meta l4proto { tcp, udp }"
    dns = f"{tcp_udp} th dport 53"
    admitted = [f"{box} . {addr} timeout {s}s" for (box, addr), s in (learned or {}).items()]
    return f"""
add table inet {table}
delete table inet {table}
table inet {table} {{
    set boxes {{ type ipv4_addr; {_elements(ips)} }}
    set deny_all {{ type ipv4_addr; {_elements(deny)} }}
    set allowlisted {{ type ipv4_addr; {_elements(listed)} }}
    set allowed {{ type ipv4_addr . ipv4_addr; flags interval; {_elements(ranges)} }}
    set learned {{ type ipv4_addr . ipv4_addr; flags timeout; {_elements(admitted)} }}
    set seen_allowed {{ {_SEEN} }}
    set seen_refused {{ {_SEEN} }}
    chain refused {{
        ip saddr @boxes meta l4proto {{ tcp, udp }} update @seen_refused {{ {_SEEN_KEY} }}
        meta l4proto tcp reject with tcp reset
        reject with icmpx type admin-prohibited
    }}
    chain allowed {{
        meta l4proto {{ tcp, udp }} update @seen_allowed {{ {_SEEN_KEY} }}
        accept
    }}
    chain egress {{
        # Cloud metadata, always, before anything else (F16).
        ip daddr 169.254.0.0/16 goto refused
        ip6 daddr fd00:ec2::254 goto refused
        ct state established,related accept
        # Other instances' boxes on a shared bridge: their own table decides.
        ip saddr != @boxes return
        # Names are filtered by Paddock's resolver; no way around it.
        meta l4proto {{ tcp, udp }} th dport {{ 53, 853 }} goto refused
        ip saddr @deny_all goto refused
        ip saddr . ip daddr @allowed goto allowed
        ip saddr . ip daddr @learned goto allowed
        ip saddr @allowlisted goto refused
        goto allowed
    }}
    chain forward {{
        type filter hook forward priority filter - 5; policy accept;
        iifname "{bridge}" jump egress
    }}
    chain prerouting {{
        type nat hook prerouting priority dstnat; policy accept;
        iifname "{bridge}" ip saddr @boxes ip daddr {gateway.ip} {dns} redirect to :{dns_port}
    }}
    chain input {{
        type filter hook input priority filter - 5; policy accept;
        # The host's own services (paddockd, the engine, SSH, ...) are not for boxes; the
        # one exception is DNS redirected to a Paddock resolver.
        iifname "{bridge}" ct state established,related accept
        iifname "{bridge}" ct status dnat {tcp_udp} ct original proto-dst 53 accept
        iifname "{bridge}" goto refused
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        ip saddr {gateway.network} oifname != "{bridge}" masquerade
    }}
}}
"""


class NftablesPolicy:
    def __init__(
        self, bridge: str, bridge_cidr: str, instance: str = "default", dns_port: int = 10053
    ) -> None:
        self._bridge = bridge
        self._cidr = bridge_cidr
        self._dns_port = dns_port
        self.table = table_name(instance)
        self._nft = Nft()
        self._boxes: dict[str, BoxAddress] = {}
        self._learned: dict[tuple[str, str], float] = {}  # -> monotonic expiry
        self._counted: dict[tuple[str, ...], int] = {}
        self._pending: list[Flow] = []
        self._restored = False
        self._next_docker_check = 0.0

    async def sync(self, boxes: list[BoxAddress]) -> None:
        """Make the rules say exactly this, keeping what DNS admitted for boxes still here."""

        def work() -> None:
            if not self._restored:
                # Admissions made before paddockd restarted are still valid for their TTL.
                self._learned.update(self._read_learned())
                self._restored = True
            # The rewrite resets the counters: take what they hold first.
            self._pending.extend(self._read_flows())
            ips = {b.ip for b in boxes}
            now = time.monotonic()
            left = {
                key: int(expiry - now)
                for key, expiry in self._learned.items()
                if key[0] in ips and expiry - now >= 1
            }
            self._learned = {k: v for k, v in self._learned.items() if k in left}
            self._nft.run(
                ruleset(self.table, self._bridge, self._cidr, self._dns_port, boxes, left)
            )
            self._counted = {}
            self._boxes = {b.ip: b for b in boxes}
            isolate_ports(self._bridge)
            if time.monotonic() >= self._next_docker_check:
                accept_in_docker_user(self._bridge)
                self._next_docker_check = time.monotonic() + DOCKER_CHECK_SECONDS

        await anyio.to_thread.run_sync(work)

    def box_at(self, ip: str) -> BoxAddress | None:
        return self._boxes.get(ip)

    async def admit(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        if not addresses:
            return
        lines = []
        now = time.monotonic()
        for address, ttl in addresses:
            seconds = max(ttl, MIN_ADMIT_SECONDS)
            element = f"{{ {box_ip} . {address} timeout {seconds}s }}"
            # add + delete + add: the one way to reset the timeout of an element that may
            # already be there, in one transaction.
            lines += [
                f"add element inet {self.table} learned {element}",
                f"delete element inet {self.table} learned {{ {box_ip} . {address} }}",
                f"add element inet {self.table} learned {element}",
            ]
            self._learned[(box_ip, address)] = now + seconds
        script = "\n".join(lines) + "\n"
        await anyio.to_thread.run_sync(lambda: self._nft.run(script))

    async def flows(self) -> list[Flow]:
        def work() -> list[Flow]:
            found = [*self._pending, *self._read_flows()]
            self._pending = []
            return found

        return await anyio.to_thread.run_sync(work)

    def remove_sync(self) -> None:
        self._nft.run(f"add table inet {self.table}\ndelete table inet {self.table}\n")

    # -- reading the kernel's sets ----------------------------------------------------
    def _set_elements(self, name: str) -> list[dict[str, Any]]:
        for row in self._nft.list_json(f"list set inet {self.table} {name}"):
            if "set" in row:
                return [e.get("elem", e) for e in row["set"].get("elem", [])]
        return []

    def _read_learned(self) -> dict[tuple[str, str], float]:
        now = time.monotonic()
        found = {}
        for elem in self._set_elements("learned"):
            box, address = elem["val"]["concat"]
            found[(str(box), str(address))] = now + float(elem.get("expires", 0))
        return found

    def _read_flows(self) -> list[Flow]:
        flows = []
        for verdict in ("allowed", "refused"):
            for elem in self._set_elements(f"seen_{verdict}"):
                box, address, proto, port = elem["val"]["concat"]
                packets = int((elem.get("counter") or {}).get("packets", 1))
                key = (verdict, str(box), str(address), str(proto), str(port))
                new = packets - self._counted.get(key, 0)
                self._counted[key] = packets
                if new > 0:
                    flows.append(Flow(str(box), str(address), str(proto), int(port), verdict, new))
        return flows


def isolate_ports(bridge: str) -> None:
    """Set `isolated on` for every port of the bridge that is not yet: one listing, and
    one `ip` call per new port only (this runs on every sync)."""
    listed = subprocess.run(
        ["ip", "-d", "-o", "link", "show", "master", bridge], capture_output=True, text=True
    ).stdout
    for line in listed.splitlines():
        if "isolated on" in line:
            continue
        port = line.split(":", 2)[1].strip().split("@")[0]
        subprocess.run(
            ["ip", "link", "set", "dev", port, "type", "bridge_slave", "isolated", "on"],
            capture_output=True,
        )


def accept_in_docker_user(bridge: str) -> None:
    """Living beside a system Docker: its iptables FORWARD policy is DROP (and with
    br_netfilter, bridged frames pass it too), so the boxes' traffic would die there.
    Docker leaves the DOCKER-USER chain to the admin; accept Paddock's bridge in it. Our
    own table still decides what boxes may reach."""

    def iptables(*args: str) -> bool:
        try:
            return subprocess.run(["iptables", *args], capture_output=True).returncode == 0
        except FileNotFoundError:
            return False

    if not iptables("-S", "DOCKER-USER"):
        return  # no system Docker here
    for rule in (["-i", bridge, "-j", "ACCEPT"], ["-o", bridge, "-j", "ACCEPT"]):
        if not iptables("-C", "DOCKER-USER", *rule):
            iptables("-I", "DOCKER-USER", *rule)
