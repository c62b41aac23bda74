"""The rules as text: what each box's port is bound to, what allow-all refuses. The
kernel's side (that nft accepts the script) is checked when the tests run as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import replace

import pytest

from paddockd.domain.errors import PaddockError
from paddockd.domain.network import policy
from paddockd.netpolicy import nftables
from paddockd.netpolicy.base import BoxAddress
from paddockd.netpolicy.nftables import (
    BOX_SETS,
    Bridge,
    NftablesPolicy,
    RulesShape,
    box_elements,
    changes,
    forgotten,
    ruleset,
    without,
)
from paddockd.netpolicy.ports import Port

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


# -- boxes that come or change: element by element, not a rewrite ----------------------
NEW_BOX = BoxAddress(
    "d", "10.213.0.5", policy("allowlist", ["198.18.3.0/24"]), "c4", "02:42:0a:d5:00:05"
)
PORTS = {"10.213.0.2": "vetha", "10.213.0.4": "vethc"}


def test_changes_add_a_new_box_and_move_a_changed_one() -> None:
    before = box_elements(BOXES, PORTS)
    changed = [BOXES[0], BOXES[1], replace(BOXES[2], policy=policy("deny-all")), NEW_BOX]
    text = changes("pdunit", before, box_elements(changed, {**PORTS, NEW_BOX.ip: "vethd"}))
    lines = text.splitlines()
    # What c left goes first, then what c and d have now; a and b are not touched.
    assert lines[:2] == [
        "delete element inet pdunit allowlisted { 10.213.0.4 }",
        "delete element inet pdunit allowed { 10.213.0.4 . 10.1.0.0/16 }",
    ]
    assert 'add element bridge pdunit bound { "vethd" . 02:42:0a:d5:00:05 . 10.213.0.5 }' in lines
    assert "add element inet pdunit deny_all { 10.213.0.4 }" in lines
    assert "add element inet pdunit allowed { 10.213.0.5 . 198.18.3.0/24 }" in lines
    assert "10.213.0.2" not in text and "10.213.0.3" not in text
    assert changes("pdunit", before, box_elements(BOXES, PORTS)) == ""


class _Recorder:
    def __init__(self) -> None:
        self.scripts: list[str] = []

    def run(self, script: str) -> str:
        self.scripts.append(script)
        return ""

    def list_json(self, command: str) -> list[dict[str, object]]:
        return []


def _policy_at(boxes: list[BoxAddress]) -> tuple[NftablesPolicy, _Recorder]:
    net = NftablesPolicy("pdunit0", "10.213.0.1/16", pid_of=lambda cid: 0)
    recorder = _Recorder()
    net._nft = recorder  # type: ignore[assignment]
    net._applied = (BRIDGE, tuple(boxes), tuple(sorted(PORTS.items())), (), None, ())
    return net, recorder


def _shape(boxes: list[BoxAddress], ports: dict[str, str]) -> RulesShape:
    return (BRIDGE, tuple(boxes), tuple(sorted(ports.items())), (), None, ())


def test_a_box_that_comes_is_added_without_a_rewrite() -> None:
    net, recorder = _policy_at(BOXES)
    assert net._changed(_shape([*BOXES, NEW_BOX], {**PORTS, NEW_BOX.ip: "vethd"}))
    assert len(recorder.scripts) == 1 and "delete" not in recorder.scripts[0]
    assert net.box_at(NEW_BOX.ip) == NEW_BOX


def test_a_box_that_leaves_goes_element_by_element_with_its_admissions() -> None:
    # Its address's admissions (timed elements) go in the same transaction: another box
    # may take the address next.
    net, recorder = _policy_at(BOXES)
    assert net.table == "paddock"  # the default instance's
    admitted = {"learned": {(BOXES[2].ip, "198.18.1.4")}}
    assert net._changed(_shape(BOXES[:2], PORTS), admitted)
    script = recorder.scripts[-1]
    assert script.splitlines()[:2] == [
        "add element inet paddock learned { 10.213.0.4 . 198.18.1.4 timeout 1s }",
        "delete element inet paddock learned { 10.213.0.4 . 198.18.1.4 }",
    ]
    assert "delete element inet paddock boxes { 10.213.0.4 }" in script
    assert net.box_at(BOXES[2].ip) is None
    # The same address, another box (removed and made between two syncs).
    net, recorder = _policy_at(BOXES)
    taken = replace(NEW_BOX, ip=BOXES[2].ip)
    assert net._changed(_shape([*BOXES[:2], taken], PORTS), admitted)
    forgot = "delete element inet paddock learned { 10.213.0.4 . 198.18.1.4 }"
    assert forgot in recorder.scripts[-1]
    assert net.box_at(BOXES[2].ip) == taken


def test_what_is_not_a_box_coming_changing_or_going_takes_a_rewrite() -> None:
    net, recorder = _policy_at(BOXES)
    # Anything but the boxes changed: the rules around them are written anew.
    assert not net._changed(
        (BRIDGE, tuple(BOXES), tuple(sorted(PORTS.items())), ("10.0.0.0/8",), None, ())
    )
    # Two boxes at one address: no set could say whose it is.
    assert not net._changed(_shape([*BOXES, replace(NEW_BOX, ip=BOXES[0].ip)], PORTS))
    assert recorder.scripts == []


class _Refusing(_Recorder):
    def run(self, script: str) -> str:
        raise PaddockError("nft: No such file or directory (the table was flushed)")


def _one_box(net: NftablesPolicy, box_id: str, box: BoxAddress | None) -> dict[str, str] | None:
    return net._sync_box(box_id, box)


def test_one_box_changing_touches_only_its_elements_and_lists_no_port() -> None:
    net, recorder = _policy_at(BOXES)
    net._inits.alive = lambda cid: cid == "c3"  # type: ignore[method-assign]
    changed = replace(BOXES[2], policy=policy("deny-all"))
    assert _one_box(net, "c", changed) == {}
    (script,) = recorder.scripts
    assert "10.213.0.2" not in script and "10.213.0.3" not in script
    assert "add element inet paddock deny_all { 10.213.0.4 }" in script
    assert "vethc" not in script  # its port binding stays as it was
    assert net.box_at(changed.ip) == changed
    # The same again changes nothing, and sends nothing.
    assert _one_box(net, "c", changed) == {} and len(recorder.scripts) == 1


def test_one_box_coming_is_bound_to_the_port_of_its_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    net, recorder = _policy_at(BOXES)
    isolated: list[str] = []
    listed = [Port("vetha", 3, True), Port("vethc", 5, True), Port("vethd", 7, False)]
    monkeypatch.setattr(nftables, "bridge_ports", lambda bridge: listed)
    monkeypatch.setattr(nftables, "isolate", isolated.append)
    monkeypatch.setattr(nftables, "NamespaceIds", lambda: _Ids({4242: 7}))
    net._inits.pid = lambda cid, fresh=False, hint=0: 4242 if cid == "c4" else 0  # type: ignore[method-assign]
    assert _one_box(net, "d", NEW_BOX) == {}
    assert isolated == ["vethd"]  # a new port is isolated on the way
    assert (
        'add element bridge paddock bound { "vethd" . 02:42:0a:d5:00:05 . 10.213.0.5 }'
        in (recorder.scripts[-1])
    )
    assert dict(net._applied[2])[NEW_BOX.ip] == "vethd"  # type: ignore[index]
    # No port of its namespace (or two): only a full sync can say why.
    monkeypatch.setattr(nftables, "NamespaceIds", lambda: _Ids({}))
    other = replace(NEW_BOX, box_id="e", ip="10.213.0.6", container_id="c5")
    assert _one_box(net, "e", other) is None


def test_one_box_leaving_takes_its_admissions_in_the_same_transaction() -> None:
    net, recorder = _policy_at(BOXES)
    net._boxes = {b.ip: b for b in BOXES}
    later = time.monotonic() + 600
    net._timed["learned"] = {(BOXES[2].ip, "198.18.1.4"): later, (BOXES[0].ip, "198.18.2.8"): later}
    assert _one_box(net, "c", None) == {}
    script = recorder.scripts[-1]
    assert "delete element inet paddock learned { 10.213.0.4 . 198.18.1.4 }" in script
    assert "delete element inet paddock boxes { 10.213.0.4 }" in script
    assert "10.213.0.2" not in script
    assert list(net._timed["learned"]) == [(BOXES[0].ip, "198.18.2.8")]
    assert net.box_at(BOXES[2].ip) is None


def test_one_box_is_left_to_a_full_sync_where_it_alone_cannot_be_done() -> None:
    # No sync ran yet.
    net = NftablesPolicy("pdunit0", "10.213.0.1/16", pid_of=lambda cid: 0)
    assert _one_box(net, "d", NEW_BOX) is None
    # Another box holds its address.
    net, recorder = _policy_at(BOXES)
    assert _one_box(net, "d", replace(NEW_BOX, ip=BOXES[0].ip)) is None
    assert recorder.scripts == []
    # The kernel refused the change (a flushed table): what was admitted stays known, for
    # the full sync to drop with the rules it writes.
    net, _ = _policy_at(BOXES)
    last = net._applied
    net._nft = _Refusing()  # type: ignore[assignment]
    later = time.monotonic() + 600
    net._timed["learned"] = {(BOXES[2].ip, "198.18.1.4"): later}
    assert _one_box(net, "c", None) is None
    assert (BOXES[2].ip, "198.18.1.4") in net._timed["learned"]
    assert net._applied == last  # one transaction: the kernel's rules are the last shape


class _Ids:
    def __init__(self, by_pid: dict[int, int]) -> None:
        self._by_pid = by_pid

    def __enter__(self) -> _Ids:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def of(self, pid: int) -> int | None:
        return self._by_pid.get(pid)


def _in_netns(name: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", name, "nft", "-f", "-"],
        input=script,
        text=True,
        capture_output=True,
    )


def _set_contents(ns: str) -> dict[str, list[str]]:
    found = {}
    for family, name in BOX_SETS:
        out = subprocess.run(
            ["ip", "netns", "exec", ns, "nft", "-j", "list", "set", family, "pdunit", name],
            text=True,
            capture_output=True,
            check=True,
        ).stdout
        rows = [r["set"] for r in json.loads(out)["nftables"] if "set" in r]
        found[f"{family} {name}"] = sorted(
            json.dumps(e, sort_keys=True) for e in rows[0].get("elem", [])
        )
    return found


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("ip") is None,
    reason="network namespaces need root, nft and ip",
)
def test_the_kernel_ends_with_the_sets_a_rewrite_would_write() -> None:
    """In two network namespaces of the test's own: the ruleset before, then the changes;
    and the ruleset after, written whole. Every box set holds the same."""
    tag = uuid.uuid4().hex[:6]
    stepped, whole = f"pdunit-{tag}-a", f"pdunit-{tag}-b"
    after = [BOXES[0], BOXES[1], replace(BOXES[2], policy=policy("deny-all")), NEW_BOX]
    after_ports = {**PORTS, NEW_BOX.ip: "vethd"}
    try:
        for ns in (stepped, whole):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        done = _in_netns(stepped, ruleset("pdunit", BRIDGE, 10053, BOXES, ports=PORTS))
        assert done.returncode == 0, done.stderr
        script = changes("pdunit", box_elements(BOXES, PORTS), box_elements(after, after_ports))
        done = _in_netns(stepped, script)
        assert done.returncode == 0, done.stderr
        done = _in_netns(whole, ruleset("pdunit", BRIDGE, 10053, after, ports=after_ports))
        assert done.returncode == 0, done.stderr
        assert _set_contents(stepped) == _set_contents(whole)
        assert "10.213.0.5" in json.dumps(_set_contents(stepped))
    finally:
        for ns in (stepped, whole):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def _admitted(ns: str) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-j", "list", "set", "inet", "pdunit", "learned"],
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    rows = [r["set"] for r in json.loads(out)["nftables"] if "set" in r]
    return sorted(" . ".join(e["elem"]["val"]["concat"]) for e in rows[0].get("elem", []))


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("ip") is None,
    reason="network namespaces need root, nft and ip",
)
def test_a_box_leaving_ends_as_a_rewrite_would_and_its_admissions_with_it() -> None:
    """Box c leaves: its elements and its admissions go in one transaction, which holds
    even for an admission that timed out meanwhile (never in the kernel any more)."""
    tag = uuid.uuid4().hex[:6]
    stepped, whole = f"pdunit-{tag}-a", f"pdunit-{tag}-b"
    kept = {(BOXES[0].ip, "198.18.2.8"): 600}
    learned = {**kept, (BOXES[2].ip, "198.18.1.4"): 600}
    gone = {"learned": {(BOXES[2].ip, "198.18.1.4"), (BOXES[2].ip, "198.18.9.9")}}
    try:
        for ns in (stepped, whole):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        before = ruleset("pdunit", BRIDGE, 10053, BOXES, learned=learned, ports=PORTS)
        assert _in_netns(stepped, before).returncode == 0
        assert "10.213.0.4 . 198.18.1.4" in _admitted(stepped)
        script = forgotten("pdunit", gone) + changes(
            "pdunit", box_elements(BOXES, PORTS), box_elements(BOXES[:2], PORTS)
        )
        done = _in_netns(stepped, script)
        assert done.returncode == 0, done.stderr
        after = ruleset("pdunit", BRIDGE, 10053, BOXES[:2], learned=kept, ports=PORTS)
        assert _in_netns(whole, after).returncode == 0
        assert _set_contents(stepped) == _set_contents(whole)
        assert _admitted(stepped) == _admitted(whole) == ["10.213.0.2 . 198.18.2.8"]
    finally:
        for ns in (stepped, whole):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def test_an_address_that_changed_hands_carries_none_of_its_admissions() -> None:
    net, _ = _policy_at(BOXES)
    net._boxes = {b.ip: b for b in BOXES}
    later = time.monotonic() + 600
    net._timed["learned"] = {(BOXES[2].ip, "198.18.1.4"): later, (BOXES[0].ip, "198.18.2.8"): later}
    # Box c was removed and a new box got its address before a sync saw it go.
    taken = replace(NEW_BOX, ip=BOXES[2].ip)
    left = net._carried([BOXES[0], BOXES[1], taken])
    assert list(left["learned"]) == [(BOXES[0].ip, "198.18.2.8")]
    assert (BOXES[2].ip, "198.18.1.4") not in net._timed["learned"]
    # The same box at the same address keeps what it was admitted.
    assert list(net._carried(BOXES)["learned"]) == [(BOXES[0].ip, "198.18.2.8")]


@pytest.mark.anyio
async def test_waiting_for_the_first_rules_ends_when_they_are_written_or_at_the_timeout() -> None:
    net, _ = _policy_at(BOXES)
    started = time.monotonic()
    await net.written(0.2)  # never written since this process started
    assert time.monotonic() - started >= 0.2
    net._written_once = True
    started = time.monotonic()
    await net.written(5)
    assert time.monotonic() - started < 0.1
