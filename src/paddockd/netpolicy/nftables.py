"""Paddock's `inet paddock` nftables table, replaced atomically with `nft -f -`.

Today it holds egress NAT for the boxes' subnet and the always-on cloud-metadata block;
per-box policies slot into the `forward` chain.
"""

from __future__ import annotations

import ipaddress
import subprocess

import anyio.to_thread

from ..domain.errors import PaddockError

TABLE = "paddock"


def ruleset(bridge: str, bridge_cidr: str) -> str:
    subnet = ipaddress.ip_interface(bridge_cidr).network
    return f"""
add table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
    chain forward {{
        type filter hook forward priority filter - 5; policy accept;
        # Cloud metadata, always, before any per-box policy (F16).
        iifname "{bridge}" ip daddr 169.254.0.0/16 reject with icmpx type admin-prohibited
        iifname "{bridge}" ip6 daddr fd00:ec2::254 reject with icmpx type admin-prohibited
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        ip saddr {subnet} oifname != "{bridge}" masquerade
    }}
}}
"""


class NftablesPolicy:
    def __init__(self, bridge: str, bridge_cidr: str) -> None:
        self._rules = ruleset(bridge, bridge_cidr)

    def apply_sync(self) -> None:
        done = subprocess.run(["nft", "-f", "-"], input=self._rules, capture_output=True, text=True)
        if done.returncode != 0:
            raise PaddockError(f"nft refused Paddock's rules: {done.stderr.strip()}")

    async def ensure(self) -> None:
        await anyio.to_thread.run_sync(self.apply_sync)
