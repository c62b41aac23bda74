"""Paddock's nftables tables, rewritten atomically (`nft -f -`) from the desired state.

`inet paddock[_<instance>]` holds: egress NAT for the boxes' subnet; cloud metadata
refused for every box, first; per-box egress (deny-all, or an allowlist of IPv4 ranges,
keyed by the box's address); and no way from a box to the host's own services. Box-to-box
frames are switched on the bridge and never reach the inet forward hook, so every port of
the bridge is set `isolated on` (isolated ports cannot talk to each other, only to the
host side, which the input chain guards). Refusals are resets/ICMP errors, not silent
drops, so agents fail fast. Connections already established may finish after a policy
change (deny-all included).
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from collections.abc import Iterable

import anyio.to_thread

from ..domain.errors import PaddockError
from ..domain.network import NetworkPolicy


def table_name(instance: str) -> str:
    return (
        "paddock" if instance == "default" else "paddock_" + re.sub(r"[^A-Za-z0-9_]", "_", instance)
    )


def _elements(items: Iterable[str]) -> str:
    listed = sorted(set(items))
    return f"elements = {{ {', '.join(listed)} }}" if listed else ""


def ruleset(
    table: str, bridge: str, bridge_cidr: str, boxes: list[tuple[str, NetworkPolicy]]
) -> str:
    subnet = ipaddress.ip_interface(bridge_cidr).network
    deny = [ip for ip, p in boxes if p.mode == "deny-all"]
    listed = [ip for ip, p in boxes if p.mode == "allowlist"]
    allowed = [f"{ip} . {cidr}" for ip, p in boxes if p.mode == "allowlist" for cidr in p.allow]
    return f"""
add table inet {table}
delete table inet {table}
table inet {table} {{
    set deny_all {{ type ipv4_addr; {_elements(deny)} }}
    set allowlisted {{ type ipv4_addr; {_elements(listed)} }}
    set allowed {{ type ipv4_addr . ipv4_addr; flags interval; {_elements(allowed)} }}
    chain refuse {{
        meta l4proto tcp reject with tcp reset
        reject with icmpx type admin-prohibited
    }}
    chain forward {{
        type filter hook forward priority filter - 5; policy accept;
        # Cloud metadata, always, before anything else (F16).
        iifname "{bridge}" ip daddr 169.254.0.0/16 jump refuse
        iifname "{bridge}" ip6 daddr fd00:ec2::254 jump refuse
        iifname "{bridge}" ct state established,related accept
        iifname "{bridge}" ip saddr @deny_all jump refuse
        iifname "{bridge}" ip saddr . ip daddr @allowed accept
        iifname "{bridge}" ip saddr @allowlisted jump refuse
    }}
    chain input {{
        type filter hook input priority filter - 5; policy accept;
        # The host's own services (paddockd, the engine, SSH, ...) are not for boxes.
        iifname "{bridge}" ct state established,related accept
        iifname "{bridge}" jump refuse
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        ip saddr {subnet} oifname != "{bridge}" masquerade
    }}
}}
"""


def nft(script: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True)
    if done.returncode != 0:
        raise PaddockError(f"nft refused Paddock's rules: {done.stderr.strip()}")


class NftablesPolicy:
    def __init__(self, bridge: str, bridge_cidr: str, instance: str = "default") -> None:
        self._bridge = bridge
        self._cidr = bridge_cidr
        self.table = table_name(instance)

    async def sync(self, boxes: list[tuple[str, NetworkPolicy]]) -> None:
        """Make the rules say exactly this: (box address, policy) for every running box."""
        script = ruleset(self.table, self._bridge, self._cidr, boxes)

        def work() -> None:
            nft(script)
            isolate_ports(self._bridge)

        await anyio.to_thread.run_sync(work)

    def remove_sync(self) -> None:
        nft(f"add table inet {self.table}\ndelete table inet {self.table}\n")


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
