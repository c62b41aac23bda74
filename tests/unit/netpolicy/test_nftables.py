"""The rules as text: what each box's port is bound to, what allow-all refuses. The
kernel's side (that nft accepts the script) is checked when the tests run as root."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from paddockd.domain.network import policy
from paddockd.netpolicy.base import BoxAddress
from paddockd.netpolicy.nftables import Bridge, ruleset, without

BRIDGE = Bridge("pdunit0", "10.213.0.1/16", "0a:01:02:03:04:05")
BOXES = [
    BoxAddress("a", "10.213.0.2", policy("allow-all"), "c1", "02:42:0a:d5:00:02"),
    BoxAddress("b", "10.213.0.3", policy("deny-all"), "c2", "02:42:0a:d5:00:03"),
    BoxAddress("c", "10.213.0.4", policy("allowlist", ["10.1.0.0/16"]), "c3", "02:42:0a:d5:00:04"),
]


def rules(**kwargs: object) -> str:
    args: dict[str, object] = {"ports": {"10.213.0.2": "vetha", "10.213.0.4": "vethc"}}
    args.update(kwargs)
    return ruleset("pdunit", BRIDGE, 10053, BOXES, **args)  # type: ignore[arg-type]


def test_each_bound_port_may_send_only_its_boxs_mac_and_address() -> None:
    text = rules()
    assert '"vetha" . 02:42:0a:d5:00:02 . 10.213.0.2' in text
    assert '"vethc" . 02:42:0a:d5:00:04 . 10.213.0.4' in text
    # Box b has no port yet: it is enforced by address but nothing of it is bound, so the
    # guard drops its frames to the gateway.
    assert "02:42:0a:d5:00:03 . 10.213.0.3" not in text
    assert f"ether daddr {BRIDGE.mac} counter name spoofed drop" in text


def test_allow_all_refuses_non_public_ranges_after_explicit_allowlists() -> None:
    text = rules(refused=["10.0.0.0/8", "10.1.2.0/24", "192.0.2.0/24"])
    # Overlaps collapse (an interval set refuses them).
    assert "elements = { 10.0.0.0/8, 192.0.2.0/24 }" in text
    egress = text[text.index("chain egress") :]
    assert egress.index("@allowed goto allowed") < egress.index("@not_public goto refused")
    assert egress.index("@not_public goto refused") < egress.index("@learned goto allowed")
    assert egress.index("@metadata goto refused") < egress.index("ct state established")


def test_closed_ranges_are_refused_before_any_allowlist() -> None:
    # An allowlist stored before allowlists were checked cannot open them either.
    text = rules(shut=without(["10.0.0.0/8", "198.18.255.0/30"], ["10.99.0.0/24"]))
    assert "set closed { type ipv4_addr; flags interval; elements = { 10.0.0.0/10," in text
    assert "10.99.0.0/24" not in text[text.index("set closed") : text.index("set seen_allowed")]
    egress = text[text.index("chain egress") :]
    assert egress.index("@closed goto refused") < egress.index("@allowed goto allowed")


def test_without_cuts_opened_ranges_out() -> None:
    assert without(["10.0.0.0/8"], ["10.0.0.0/8"]) == []
    assert without(["10.0.0.0/30"], ["10.0.0.2/31"]) == ["10.0.0.0/31"]
    assert without(["192.168.0.0/16"], ["10.0.0.0/8"]) == ["192.168.0.0/16"]


def test_a_rewrite_keeps_what_the_spoofed_counters_held() -> None:
    text = rules(spoofed={"bridge": (3, 180), "arp": (1, 28)})
    bridge, arp = text.index("table bridge"), text.index("table arp")
    assert text.index("counter spoofed { packets 3 bytes 180 }") in range(bridge, arp)
    assert text.index("counter spoofed { packets 1 bytes 28 }") > arp
    assert "counter spoofed { packets 0 bytes 0 }" in rules()


def test_masquerade_and_forwarding_only_for_known_boxes() -> None:
    text = rules()
    assert 'ip saddr @boxes oifname != "pdunit0" masquerade' in text
    assert 'iifname "pdunit0" oifname "pdunit0" counter name between_boxes drop' in text
    assert "meta nfproto ipv6 goto refused" in text


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None, reason="nft -c needs root and nft"
)
def test_nft_accepts_the_script() -> None:
    script = rules(spoofed={"bridge": (3, 180)})
    done = subprocess.run(["nft", "-c", "-f", "-"], input=script, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr


def test_image_builds_get_nat_but_no_metadata() -> None:
    text = rules(builds="10.212.0.1/24")
    assert "ip saddr 10.212.0.0/24 ip daddr != 10.212.0.0/24 masquerade" in text
    assert "ip saddr 10.212.0.0/24 ip daddr @metadata goto refused" in text
