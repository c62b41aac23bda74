"""Paddock's nftables tables, kept to the desired state one transaction at a time: the
boxes' own sets changed element by element where boxes only came or changed, else the
tables rewritten.

Three tables per instance, one transaction:
- `bridge paddock[_<instance>]` locks each bridge port to its box: a port emits only the
  MAC and IPv4 address the engine gave that box's container (IPv4 and ARP; IPv6, VLAN tags
  and anything else are dropped and counted in `spoofed`). A port not bound yet (a box
  starting) cannot reach the host side of the bridge nor claim a bound MAC. Frames between
  ports are dropped (and every port is also `isolated on`).
- `arp paddock[_<instance>]`: the host learns from the bridge only the (MAC, address) pairs
  of bound boxes, so no box can poison the host's neighbour table.
- `inet paddock[_<instance>]`: egress NAT for known box addresses only; cloud metadata
  refused for every box, first; IPv6 refused (boxes are IPv4-only); the boxes' DNS
  redirected to Paddock's resolver and DNS to anything else refused; per-box egress
  (deny-all, or an allowlist of IPv4 ranges plus the addresses DNS answers for allowed names
  admitted for their TTL); non-public ranges and the host's own networks refused unless an
  allowlist names them; nothing routed from one box to another, or into a box; no way from
  a box to the host's own services. Refusals are resets/ICMP errors, not silent drops, so
  agents fail fast. Connections already established may finish after a policy change.

New connections are counted per (box, address, protocol, port) in two dynamic sets, one
per verdict; reading them is how the egress log learns what boxes tried to reach.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from ..domain.errors import PaddockError
from ..domain.network import METADATA, NON_PUBLIC, Closed, closed_ranges
from . import rtnetlink
from .base import BoxAddress, Flow
from .conntrack import Conntrack
from .inits import Inits
from .libnft import Nft
from .ports import Port, bridge_ports, host_networks, isolate, pin_bridge
from .rtnetlink import NamespaceIds

# How often to look for a system Docker's DOCKER-USER chain (it may start after us).
DOCKER_CHECK_SECONDS = 20.0
# Rules written anew at least this often even when nothing changed: what changed them
# behind paddockd's back and left its tables standing (a rule deleted by hand) is undone
# within this time. A flushed ruleset or a table made again is seen at the next sync.
REWRITE_SECONDS = 60.0
# A short floor keeps a zero-TTL answer usable for the connection that asked for it.
MIN_ADMIT_SECONDS = 30
MAX_INTERCEPT_SECONDS = 3600
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


def _collapsed(ranges: Iterable[str]) -> list[str]:
    """Overlapping ranges (the host's LAN inside 10/8, say) as one disjoint list: an
    interval set refuses overlaps."""
    nets = [ipaddress.IPv4Network(r, strict=False) for r in ranges]
    return [str(n) for n in ipaddress.collapse_addresses(nets)]


@dataclass(frozen=True)
class Bridge:
    name: str
    cidr: str  # the gateway's address and the boxes' subnet, e.g. 10.213.0.1/16
    mac: str  # the bridge's own (pinned) MAC: the boxes' gateway


# What a ruleset is written from, but for the timed admissions (kept in the kernel's sets
# between rewrites) and the counters: bridge, boxes, (box address, its bridge port)
# pairs, refused ranges, the builds' subnet, shut ranges.
RulesShape = tuple[
    Bridge,
    tuple[BoxAddress, ...],
    tuple[tuple[str, str], ...],
    tuple[str, ...],
    str | None,
    tuple[str, ...],
]


def without(ranges: Iterable[str], opened: Iterable[str]) -> list[str]:
    """`ranges` with the `opened` ranges cut out of them."""
    left = [ipaddress.IPv4Network(r, strict=False) for r in ranges]
    for o in (ipaddress.IPv4Network(x, strict=False) for x in opened):
        cut: list[ipaddress.IPv4Network] = []
        for net in left:
            if net.subnet_of(o):
                continue
            cut += list(net.address_exclude(o)) if o.subnet_of(net) else [net]
        left = cut
    return [str(n) for n in left]


@dataclass(frozen=True)
class Gateway:
    """The credential gateway's listeners on the bridge's address: `port` takes the boxes'
    HTTP to the gateway's address (port 80), `intercept_port` their HTTPS to the hosts
    their secrets are bound to."""

    port: int
    intercept_port: int


def _timed(pairs: dict[tuple[str, str], int] | None) -> list[str]:
    return [f"{box} . {addr} timeout {s}s" for (box, addr), s in (pairs or {}).items()]


# The sets whose elements are the boxes' own (family, set): written whole by a rewrite,
# changed element by element when boxes only come or change (`changes`).
BOX_SETS = (
    ("bridge", "ports"),
    ("bridge", "bound"),
    ("bridge", "macs"),
    ("arp", "pairs"),
    ("inet", "boxes"),
    ("inet", "deny_all"),
    ("inet", "allowlisted"),
    ("inet", "allowed"),
)


def box_elements(
    boxes: Iterable[BoxAddress], ports: dict[str, str] | None = None
) -> dict[tuple[str, str], set[str]]:
    """Each of BOX_SETS' elements for these boxes; `ports` maps a box's address to the
    bridge port bound to it (a box without one, or without a MAC, has no binding yet)."""
    found: dict[tuple[str, str], set[str]] = {key: set() for key in BOX_SETS}
    for b in boxes:
        found["inet", "boxes"].add(b.ip)
        if b.policy.mode == "deny-all":
            found["inet", "deny_all"].add(b.ip)
        elif b.policy.mode == "allowlist":
            found["inet", "allowlisted"].add(b.ip)
            found["inet", "allowed"].update(f"{b.ip} . {r}" for r in b.policy.ranges)
        port = (ports or {}).get(b.ip)
        if port and b.mac:
            found["bridge", "ports"].add(f'"{port}"')
            found["bridge", "bound"].add(f'"{port}" . {b.mac} . {b.ip}')
            found["bridge", "macs"].add(b.mac)
            found["arp", "pairs"].add(f"{b.mac} . {b.ip}")
    return found


def changes(
    table: str, before: dict[tuple[str, str], set[str]], after: dict[tuple[str, str], set[str]]
) -> str:
    """The one transaction that takes BOX_SETS from `before` to `after` ("" if none):
    what went is deleted before what came is added."""
    lines = []
    for verb, old, new in (("delete", before, after), ("add", after, before)):
        for family, name in BOX_SETS:
            if elements := sorted(old[family, name] - new[family, name]):
                lines.append(
                    f"{verb} element {family} {table} {name} {{ {', '.join(elements)} }}\n"
                )
    return "".join(lines)


def forgotten(table: str, dropped: dict[str, set[tuple[str, str]]]) -> str:
    """The lines that delete these timed elements (set name -> (box address, admitted
    address)) whether or not each is still there: one that timed out meanwhile would
    fail a plain delete, and with it the whole transaction; added again first (with the
    shortest timeout), it is there to delete."""
    lines = []
    for name, keys in sorted(dropped.items()):
        for box_ip, address in sorted(keys):
            element = f"{box_ip} . {address}"
            lines.append(f"add element inet {table} {name} {{ {element} timeout 1s }}\n")
            lines.append(f"delete element inet {table} {name} {{ {element} }}\n")
    return "".join(lines)


def ruleset(
    table: str,
    bridge: Bridge,
    dns_port: int,
    boxes: list[BoxAddress],
    learned: dict[tuple[str, str], int] | None = None,
    ports: dict[str, str] | None = None,
    refused: Iterable[str] = NON_PUBLIC,
    builds: str | None = None,
    spoofed: dict[str, tuple[int, int]] | None = None,
    shut: Iterable[str] = (),
    gateway: Gateway | None = None,
    intercepted: dict[tuple[str, str], int] | None = None,
) -> str:
    """All three tables. `learned` maps (box address, admitted address) to seconds left;
    `ports` maps a box's address to the bridge port bound to it; `refused` are the ranges
    allow-all does not reach; `shut` those no allowlist reaches either (what of them the
    owner has not opened: an allowlist stored before that rule cannot pass); `builds` is
    the image builds' subnet (NAT only: what runs there is Paddock's own Dockerfiles);
    `spoofed` the (packets, bytes) the `spoofed` counters held per family, carried over so
    a rewrite never hides an attack. `gateway`: the credential gateway's ports, and
    `intercepted` the (box address, admitted address) pairs whose HTTPS goes through it
    (the addresses of hosts a secret attached to the box is bound to), to seconds left."""
    gateway_ip = ipaddress.ip_interface(bridge.cidr).ip
    br = bridge.name
    own = {key: _elements(elements) for key, elements in box_elements(boxes, ports).items()}
    tcp_udp = "meta l4proto { tcp, udp }"
    dns = f"{tcp_udp} th dport 53"
    build_nat = build_forward = ""
    if builds:
        subnet = ipaddress.ip_interface(builds).network
        build_nat = f"\n        ip saddr {subnet} ip daddr != {subnet} masquerade"
        # Builds run npm's and pip's install scripts: no cloud metadata for them either.
        build_forward = f"\n        ip saddr {subnet} ip daddr @metadata goto refused"
    admitted = _timed(learned)
    redirects = opened = ""
    if gateway is not None:
        # HTTPS to a bound host's addresses goes to the gateway only as far as the box's
        # policy lets it go now: an allow-all box's, an allowlisted box's where its list or
        # its lookups admit the address, a deny-all box's never (a policy changed after
        # the lookup applies at once).
        intercept = (
            f'iifname "{br}" ip saddr != @deny_all ip saddr . ip daddr @intercept tcp dport 443'
        )
        to = f"redirect to :{gateway.intercept_port}"
        redirects = (
            f'\n        iifname "{br}" ip saddr @boxes ip daddr {gateway_ip} tcp dport 80 '
            f"redirect to :{gateway.port}"
            f"\n        {intercept} ip saddr != @allowlisted {to}"
            f"\n        {intercept} ip saddr . ip daddr @learned {to}"
            f"\n        {intercept} ip saddr . ip daddr @allowed {to}"
        )
        opened = (
            f'\n        iifname "{br}" ct status dnat meta l4proto tcp '
            "ct original proto-dst { 80, 443 } "
            f"tcp dport {{ {gateway.port}, {gateway.intercept_port} }} accept"
        )
    held = {
        family: "packets {} bytes {}".format(*(spoofed or {}).get(family, (0, 0)))
        for family in ("bridge", "arp")
    }
    return f"""
add table bridge {table}
delete table bridge {table}
table bridge {table} {{
    set ports {{ type ifname; {own["bridge", "ports"]} }}
    set bound {{ type ifname . ether_addr . ipv4_addr; {own["bridge", "bound"]} }}
    set macs {{ type ether_addr; {own["bridge", "macs"]} }}
    counter spoofed {{ {held["bridge"]} }}
    chain from_box {{
        ether type ip iifname . ether saddr . ip saddr @bound accept
        ether type arp iifname . ether saddr . arp saddr ip @bound \\
            iifname . arp saddr ether . arp saddr ip @bound accept
        counter name spoofed drop
    }}
    chain prerouting {{
        type filter hook prerouting priority -300; policy accept;
        iifname @ports jump from_box
        # Not a bound port: a box starting (or a port of another bridge). It may not talk
        # to this bridge's host side nor pass for a bound box.
        ether daddr {bridge.mac} counter name spoofed drop
        ether saddr @macs counter name spoofed drop
    }}
    chain forward {{
        type filter hook forward priority -300; policy accept;
        iifname @ports counter name spoofed drop
        oifname @ports counter name spoofed drop
    }}
}}
add table arp {table}
delete table arp {table}
table arp {table} {{
    set pairs {{ type ether_addr . ipv4_addr; {own["arp", "pairs"]} }}
    counter spoofed {{ {held["arp"]} }}
    chain input {{
        type filter hook input priority filter; policy accept;
        iifname "{br}" arp saddr ether . arp saddr ip != @pairs counter name spoofed drop
    }}
}}
add table inet {table}
delete table inet {table}
table inet {table} {{
    set boxes {{ type ipv4_addr; {own["inet", "boxes"]} }}
    set deny_all {{ type ipv4_addr; {own["inet", "deny_all"]} }}
    set allowlisted {{ type ipv4_addr; {own["inet", "allowlisted"]} }}
    set allowed {{ type ipv4_addr . ipv4_addr; flags interval; {own["inet", "allowed"]} }}
    set learned {{ type ipv4_addr . ipv4_addr; flags timeout; {_elements(admitted)} }}
    set intercept {{ type ipv4_addr . ipv4_addr; flags timeout; {_elements(_timed(intercepted))} }}
    set metadata {{ type ipv4_addr; flags interval; {_elements(_collapsed(METADATA))} }}
    set not_public {{ type ipv4_addr; flags interval; {_elements(_collapsed(refused))} }}
    set closed {{ type ipv4_addr; flags interval; {_elements(_collapsed(shut))} }}
    set seen_allowed {{ {_SEEN} }}
    set seen_refused {{ {_SEEN} }}
    counter between_boxes {{ }}
    counter into_boxes {{ }}
    counter unknown_source {{ }}
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
        ip daddr @metadata goto refused
        # Boxes are IPv4-only: IPv6 is refused, never forwarded, whatever the host allows.
        meta nfproto ipv6 goto refused
        ct state established,related accept
        # The bridge guard lets only bound box addresses through; this is the second lock.
        ip saddr != @boxes counter name unknown_source drop
        # Names are filtered by Paddock's resolver; no way around it.
        meta l4proto {{ tcp, udp }} th dport {{ 53, 853 }} goto refused
        ip saddr @deny_all goto refused
        ip daddr @closed goto refused
        ip saddr . ip daddr @allowed goto allowed
        ip daddr @not_public goto refused
        ip saddr . ip daddr @learned goto allowed
        ip saddr @allowlisted goto refused
        goto allowed
    }}
    chain forward {{
        type filter hook forward priority filter - 5; policy accept;{build_forward}
        # Box to box through the gateway.
        iifname "{br}" oifname "{br}" counter name between_boxes drop
        iifname "{br}" jump egress
        # Nothing starts a connection into a box (paddockd never connects to box addresses).
        oifname "{br}" ct state new counter name into_boxes drop
    }}
    chain prerouting {{
        type nat hook prerouting priority dstnat; policy accept;
        iifname "{br}" ip saddr @boxes ip daddr {gateway_ip} {dns} redirect to :{dns_port}\
{redirects}
    }}
    chain input {{
        type filter hook input priority filter - 5; policy accept;
        # The host's own services (paddockd, the engine, SSH, ...) are not for boxes; the
        # exceptions are DNS redirected to a Paddock resolver and HTTP(S) redirected to the
        # credential gateway.
        iifname "{br}" ct state established,related accept
        iifname "{br}" ct status dnat {tcp_udp} ct original proto-dst 53 accept{opened}
        iifname "{br}" goto refused
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        ip saddr @boxes oifname != "{br}" masquerade{build_nat}
    }}
}}
"""


class NftablesPolicy:
    """The network layer on nftables. All of its state (what DNS admitted, the counters
    read so far, the boxes enforced, the ports bound) is touched only in worker threads
    holding `_lock`, so the periodic sync, DNS admissions and the egress reader can never
    interleave."""

    def __init__(
        self,
        bridge: str,
        bridge_cidr: str,
        instance: str = "default",
        dns_port: int = 10053,
        *,
        pid_of: Callable[[str], int],
        refuse_non_public: bool = True,
        builds: tuple[str, str] | None = None,
        open_ranges: tuple[str, ...] = (),
        gateway: Gateway | None = None,
    ) -> None:
        self._gateway = gateway
        self._bridge = bridge
        self._cidr = bridge_cidr
        self._dns_port = dns_port
        self._refuse_non_public = refuse_non_public
        self._open = open_ranges
        self._builds = builds  # (bridge, gateway/subnet) of image builds
        self.table = table_name(instance)
        self._nft = Nft()
        self._conntrack = Conntrack()
        self._lock = threading.Lock()
        self._boxes: dict[str, BoxAddress] = {}
        # Timed elements of the `learned` and `intercept` sets: (box, address) -> expiry
        # (monotonic), carried over each rewrite of the table.
        self._timed: dict[str, dict[tuple[str, str], float]] = {"learned": {}, "intercept": {}}
        self._counted: dict[tuple[str, ...], int] = {}
        self._pending: list[Flow] = []
        self._inits = Inits(pid_of)
        self._restored = False
        self._next_docker_check = 0.0
        # What the last rewrite was made of; a sync that would write the same rules again
        # leaves the kernel's be until REWRITE_SECONDS have passed.
        self._applied: RulesShape | None = None
        self._rewrite_due = 0.0
        self._written: dict[str, int] = {}  # family -> handle of our tables, as written
        self._written_once = False  # the rules were written since this process started

    async def sync(self, boxes: list[BoxAddress]) -> dict[str, str]:
        """Make the rules say exactly this, keeping what DNS admitted for boxes still here."""

        def work() -> dict[str, str]:
            with self._lock:
                return self._sync(boxes)

        return await anyio.to_thread.run_sync(work)

    def _closed(self) -> list[Closed]:
        return closed_ranges(self._refuse_non_public, host_networks(self._bridge))

    async def closed(self) -> list[Closed]:
        return await anyio.to_thread.run_sync(self._closed)

    async def sync_box(self, box_id: str, box: BoxAddress | None) -> dict[str, str] | None:
        """Only this box's rules, where it came, changed or went and every other box is as
        the last sync left it (a claim, a start, a policy change, a delete): its elements
        in one transaction, so the cost does not grow with the boxes. `box` None: it has
        no running container now. Returns what `sync` does for it, or None where only a
        full `sync` can do it (none ran yet, another box holds its address, its port is
        not found, the kernel refused the change: a flushed ruleset, say)."""

        def work() -> dict[str, str] | None:
            with self._lock:
                return self._sync_box(box_id, box)

        return await anyio.to_thread.run_sync(work)

    def _sync_box(self, box_id: str, box: BoxAddress | None) -> dict[str, str] | None:
        if self._applied is None:
            return None
        bridge, before, bound, refused, builds, shut = self._applied
        old = next((b for b in before if b.box_id == box_id), None)
        others = tuple(b for b in before if b.box_id != box_id)
        ports = dict(bound)
        if old is not None:
            ports.pop(old.ip, None)
            if box is None or box.container_id != old.container_id:
                self._inits.drop(old.container_id)
        if box is not None:
            if any(b.ip == box.ip for b in others):
                return None
            port = self._port_of(box, old, dict(bound))
            if port is None:
                return None
            ports[box.ip] = port
        after = (*others, box) if box is not None else others
        timed = {name: dict(kept) for name, kept in self._timed.items()}
        _, dropped = self._leaving(list(after))
        shape = (bridge, after, tuple(sorted(ports.items())), refused, builds, shut)
        # Each box's elements are its own (no two boxes share an address, checked above):
        # the change is the difference of this box's alone.
        was = box_elements([old] if old else [], dict(bound))
        if self._step(shape, dropped, was, box_elements([box] if box else [], ports)):
            return {}
        # The kernel still holds the last shape: what it admitted stays known, for the
        # full sync to carry or drop.
        self._timed = timed
        return None

    def _port_of(
        self, box: BoxAddress, old: BoxAddress | None, bound: dict[str, str]
    ) -> str | None:
        """The box's bridge port: the one it had, where it is the same container at the
        same address and that container's init still lives; else found as `sync` finds
        every box's (new ports isolated on the way)."""
        same = old is not None and (old.container_id, old.ip, old.mac) == (
            box.container_id,
            box.ip,
            box.mac,
        )
        if same and box.ip in bound and self._inits.alive(box.container_id):
            return bound[box.ip]
        if not box.container_id or not box.mac:
            return None
        with NamespaceIds() as ids:
            direct = self._port_into(box.container_id, ids, box.pid)
            if direct is not None:
                return direct
            # Not found from its namespace (no number for it yet, say): every port.
            ports = bridge_ports(self._bridge)
            for port in ports:
                if not port.isolated:
                    isolate(port.name)
            found = self._ports_of(box.container_id, _by_namespace(ports), ids)
        return found[0] if len(found) == 1 else None

    def _port_into(self, cid: str, ids: NamespaceIds, hint: int = 0) -> str | None:
        """The port leading into the namespace of the container's init, asked of that
        port alone (`rtnetlink.port_into`: a few messages, whatever the boxes), and
        isolated if it is not yet."""
        try:
            # A kept pid is asked about only while its pidfd says it lives, before and
            # after: once its init exits the number can go to another box's process.
            pid = self._inits.pid(cid, fresh=not self._inits.alive(cid), hint=hint)
            nsid = ids.of(pid) if pid else None
            index = socket.if_nametoindex(self._bridge)
        except OSError:
            return None
        if not self._inits.alive(cid):
            return None
        found = rtnetlink.port_into(index, nsid) if nsid is not None else None
        if found is None:
            return None
        if not found.isolated:
            isolate(found.name)
        return found.name

    def _leaving(
        self, boxes: list[BoxAddress]
    ) -> tuple[dict[str, dict[tuple[str, str], int]], dict[str, set[tuple[str, str]]]]:
        """What the timed sets carry over to `boxes` (`_carried`), and what the kernel may
        still hold that no box may keep: a leaving box's admissions."""
        held = {name: set(timed) for name, timed in self._timed.items()}
        left = self._carried(boxes)
        dropped = {name: keys - set(self._timed[name]) for name, keys in held.items()}
        return left, dropped

    def _sync(self, boxes: list[BoxAddress]) -> dict[str, str]:
        if not self._restored:
            # Admissions made before paddockd restarted are still valid for their TTL.
            for name, timed in self._timed.items():
                timed.update(self._read_timed(name))
            self._restored = True
        left, dropped = self._leaving(boxes)
        mac = pin_bridge(self._bridge)
        ports = bridge_ports(self._bridge)
        bound, failed = self._bind(boxes, ports)
        closed = [c for c in self._closed() if c.cidr not in METADATA]
        refused = tuple(c.cidr for c in closed)
        shut = tuple(without(refused, self._open))
        bridge = Bridge(self._bridge, self._cidr, mac)
        builds = self._builds[1] if self._builds else None
        shape = (bridge, tuple(boxes), tuple(sorted(bound.items())), refused, builds, shut)
        stale = time.monotonic() >= self._rewrite_due or self._tables() != self._written
        if stale or (shape != self._applied and not self._changed(shape, dropped)):
            self._rewrite(shape, left, spoofed=self.spoofed())
        for port in ports:
            if not port.isolated:
                isolate(port.name)
        if time.monotonic() >= self._next_docker_check:
            accept_in_docker_user(self._bridge)
            if self._builds:
                accept_in_docker_user(self._builds[0])
            self._next_docker_check = time.monotonic() + DOCKER_CHECK_SECONDS
        return failed

    def _carried(self, boxes: list[BoxAddress]) -> dict[str, dict[tuple[str, str], int]]:
        """What DNS admitted (and the gateway intercepts) that a rewrite carries over, in
        seconds left: only what addresses still held by the box they were admitted for
        have. An address that changed hands between two syncs (its box removed, another
        given it) takes none of its last holder's admissions to the next."""
        kept = {b.ip for b in boxes if self._boxes.get(b.ip, b).box_id == b.box_id}
        now = time.monotonic()
        left: dict[str, dict[tuple[str, str], int]] = {}
        for name, timed in self._timed.items():
            left[name] = {
                key: int(expiry - now)
                for key, expiry in timed.items()
                if key[0] in kept and expiry - now >= 1
            }
            self._timed[name] = {k: v for k, v in timed.items() if k in left[name]}
        return left

    def _rewrite(
        self,
        shape: RulesShape,
        left: dict[str, dict[tuple[str, str], int]],
        spoofed: dict[str, tuple[int, int]],
    ) -> None:
        """The whole ruleset anew, in one transaction. `spoofed`: what the counters held,
        taken as late as possible (what is counted between that and the rewrite, which
        resets them, is lost to the egress log)."""
        bridge, boxes, bound, refused, builds, shut = shape
        rules = ruleset(
            self.table,
            bridge,
            self._dns_port,
            list(boxes),
            left["learned"],
            dict(bound),
            refused,
            builds,
            spoofed,
            shut,
            self._gateway,
            left["intercept"],
        )
        self._pending.extend(self._read_flows())
        self._applied = None  # a failed run leaves the kernel's rules unknown
        self._nft.run(rules)
        self._applied, self._written = shape, self._tables()
        self._rewrite_due = time.monotonic() + REWRITE_SECONDS
        self._counted = {}
        self._boxes = {b.ip: b for b in boxes}
        self._written_once = True

    def _changed(
        self, shape: RulesShape, dropped: dict[str, set[tuple[str, str]]] | None = None
    ) -> bool:
        """Take the kernel's rules from the last shape to `shape` element by element, where
        boxes only came, changed or went (a create, a claim, a policy change, a delete): no
        rewrite, so nothing a rewrite resets is read first, and the cost does not grow with
        the boxes. `dropped`: the admissions (timed elements) no box may keep, among them
        those of a box that left its address, which go in the same transaction (another
        box may take the address next). False where a rewrite must do it: anything but the
        boxes changed, two boxes at one address, or the kernel refused the change."""
        if self._applied is None:
            return False
        before, after = self._applied, shape
        if before[0] != after[0] or before[3:] != after[3:]:
            return False
        if len({b.ip for b in after[1]}) != len(after[1]):
            return False
        was = box_elements(before[1], dict(before[2]))
        return self._step(shape, dropped, was, box_elements(after[1], dict(after[2])))

    def _step(
        self,
        shape: RulesShape,
        dropped: dict[str, set[tuple[str, str]]] | None,
        was: dict[tuple[str, str], set[str]],
        now: dict[tuple[str, str], set[str]],
    ) -> bool:
        """From the last shape to `shape` by changing the box sets' elements from `was`
        to `now` (all of them, or those of the one box that changed) in one transaction."""
        assert self._applied is not None
        staying = {(b.ip, b.box_id) for b in shape[1]}
        if any((b.ip, b.box_id) not in staying for b in self._applied[1]):
            # A box left its address: its last flows are read while the address is still
            # its own, as a rewrite reads them before it empties the sets.
            self._pending.extend(self._read_flows())
        script = forgotten(self.table, dropped or {}) + changes(self.table, was, now)
        try:
            if script:
                self._nft.run(script)
        except PaddockError:
            return False  # one transaction: the kernel's rules are still the last shape
        self._applied = shape
        self._boxes = {b.ip: b for b in shape[1]}
        return True

    def _bind(
        self, boxes: list[BoxAddress], ports: list[Port]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Each box's bridge port, found from the kernel's view of its container's network
        namespace (never from anything the box says). Returns (box address -> port) and
        (box id -> why no port)."""
        by_ns = _by_namespace(ports)
        bound: dict[str, str] = {}
        failed: dict[str, str] = {}
        self._inits.keep_only(b.container_id for b in boxes if b.container_id)
        with NamespaceIds() as ids:
            for box in boxes:
                if not box.container_id or not box.mac:
                    failed[box.box_id] = "the engine reported no container or MAC address"
                    continue
                found = self._ports_of(box.container_id, by_ns, ids)
                if len(found) == 1:
                    bound[box.ip] = found[0]
                else:
                    failed[box.box_id] = (
                        f"{len(found)} ports of bridge {self._bridge} lead to its network namespace"
                    )
        return bound, failed

    def _ports_of(self, cid: str, by_ns: dict[int, list[str]], ids: NamespaceIds) -> list[str]:
        found: list[str] = []
        for fresh in (False, True):
            # Not found by the init kept from before: ask the engine for it once more.
            try:
                pid = self._inits.pid(cid, fresh)
                nsid = ids.of(pid) if pid else None
            except OSError:  # the box stays unbound: its traffic is dropped
                nsid = None
            found = by_ns.get(nsid, []) if nsid is not None else []
            if found:
                break
        return found

    def box_at(self, ip: str) -> BoxAddress | None:
        return self._boxes.get(ip)

    async def written(self, timeout: float) -> None:
        # Polled: only queries in the first moments after a start ever wait here, and a
        # worker thread each would hold up the very sync they wait for.
        deadline = time.monotonic() + timeout
        while not self._written_once and time.monotonic() < deadline:
            await anyio.sleep(0.05)

    async def admit(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        await self._add_timed("learned", box_ip, addresses)

    async def intercept(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        if self._gateway is not None:
            # Capped: a name's addresses are looked up again within the hour, so a
            # detached secret's addresses do not go to the gateway for a day.
            capped = [(a, min(ttl, MAX_INTERCEPT_SECONDS)) for a, ttl in addresses]
            await self._add_timed("intercept", box_ip, capped)

    async def _add_timed(self, name: str, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        if not addresses:
            return

        def work() -> None:
            lines = []
            now = time.monotonic()
            with self._lock:
                for address, ttl in addresses:
                    seconds = max(ttl, MIN_ADMIT_SECONDS)
                    element = f"{{ {box_ip} . {address} timeout {seconds}s }}"
                    # add + delete + add: the one way to reset the timeout of an element
                    # that may already be there, in one transaction.
                    lines += [
                        f"add element inet {self.table} {name} {element}",
                        f"delete element inet {self.table} {name} {{ {box_ip} . {address} }}",
                        f"add element inet {self.table} {name} {element}",
                    ]
                    self._timed[name][(box_ip, address)] = now + seconds
                self._nft.run("\n".join(lines) + "\n")

        await anyio.to_thread.run_sync(work)

    async def flows(self) -> list[Flow]:
        def work() -> list[Flow]:
            with self._lock:
                found = [*self._pending, *self._read_flows()]
                self._pending = []
                return found

        return await anyio.to_thread.run_sync(work)

    async def forget_flows(self, ip: str) -> None:
        await anyio.to_thread.run_sync(self._conntrack.forget, ip)

    def remove_sync(self) -> None:
        self._nft.run(
            "".join(
                f"add table {family} {self.table}\ndelete table {family} {self.table}\n"
                for family in ("inet", "bridge", "arp")
            )
        )

    # -- reading the kernel's sets ----------------------------------------------------
    def _tables(self) -> dict[str, int]:
        """Our tables as the kernel has them (family -> handle): a flushed ruleset (as an
        `nftables.service` restart does) or a table deleted and made again shows here,
        in a listing whose size does not grow with the boxes."""
        return {
            str(row["table"]["family"]): int(row["table"]["handle"])
            for row in self._nft.list_json("list tables")
            if "table" in row and row["table"].get("name") == self.table
        }

    def spoofed(self) -> dict[str, tuple[int, int]]:
        """(packets, bytes) dropped as forged so far, per family (bridge, arp)."""
        held = {}
        for family in ("bridge", "arp"):
            for row in self._nft.list_json(f"list counter {family} {self.table} spoofed"):
                if "counter" in row:
                    held[family] = (int(row["counter"]["packets"]), int(row["counter"]["bytes"]))
        return held

    def _set_elements(self, name: str) -> list[dict[str, Any]]:
        for row in self._nft.list_json(f"list set inet {self.table} {name}"):
            if "set" in row:
                return [e.get("elem", e) for e in row["set"].get("elem", [])]
        return []

    def _read_timed(self, name: str) -> dict[tuple[str, str], float]:
        now = time.monotonic()
        found = {}
        for elem in self._set_elements(name):
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


def _by_namespace(ports: list[Port]) -> dict[int, list[str]]:
    """The bridge's ports by the namespace their far end is in."""
    by_ns: dict[int, list[str]] = {}
    for port in ports:
        if port.netnsid is not None:
            by_ns.setdefault(port.netnsid, []).append(port.name)
    return by_ns


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
