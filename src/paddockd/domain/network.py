"""A box's egress policy: allow-all, deny-all, or an allowlist of IPv4 ranges and domain
names (exact, or `*.example.com` for any name below example.com, not example.com itself)."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidRequest

NetworkMode = Literal["allow-all", "deny-all", "allowlist"]
MODES: tuple[NetworkMode, ...] = ("allow-all", "deny-all", "allowlist")
# Cloud metadata services: refused to every box whatever its policy (F16). AWS, GCP, Azure
# and OpenStack use 169.254.169.254 (Azure's wire server is 168.63.129.16), Alibaba
# 100.100.100.200; all of link-local goes with them.
METADATA = ("169.254.0.0/16", "168.63.129.16/32", "100.100.100.200/32")
METADATA6 = ("fd00:ec2::254/128", "fe80::/10")
# Not the public internet: a VPS's private networks (RFC 1918), carrier-grade NAT, this
# network, loopback, IETF protocol assignments, multicast and reserved. Allow-all refuses
# them (as it does the host's own addresses and networks) unless an allowlist names them.
NON_PUBLIC = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
_DOMAIN_RE = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


@dataclass(frozen=True)
class NetworkPolicy:
    mode: NetworkMode = "allow-all"
    allow: tuple[str, ...] = ()  # IPv4 CIDRs and lower-case domains, normalised

    @property
    def ranges(self) -> tuple[str, ...]:
        return tuple(t for t in self.allow if is_range(t))

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(t for t in self.allow if not is_range(t))

    def allows_name(self, name: str) -> bool:
        """May the box resolve (and then reach) this name?"""
        if self.mode != "allowlist":
            return self.mode == "allow-all"
        name = name.lower().rstrip(".")
        return any(name_matches(pattern, name) for pattern in self.domains)

    def to_json(self) -> str:
        return json.dumps({"mode": self.mode, "allow": list(self.allow)})

    @classmethod
    def from_json(cls, text: str | None) -> NetworkPolicy:
        if not text:
            return cls()
        data = json.loads(text)
        mode = str(data.get("mode", "allow-all"))
        if mode not in MODES:  # a stored policy is paddockd's own writing; never trusted
            return cls("deny-all")
        return cls(mode, tuple(data.get("allow", [])))


def is_range(target: str) -> bool:
    return bool(re.fullmatch(r"[0-9./]+", target))


def name_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("*."):
        return name.endswith(pattern[1:])
    return name == pattern


_HOST_PORT_RE = re.compile(r"^[a-z0-9.*-]+:\d{1,5}$")


def parse_target(target: str) -> str:
    """An allowlist entry: an IPv4 address or CIDR (host bits must be zero), a domain name,
    or a `*.` wildcard domain."""
    text = target.strip().lower().rstrip(".")
    if not text:
        raise InvalidRequest("an empty allowlist entry")
    if "://" in text:
        host = text.partition("://")[2].split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0]
        raise InvalidRequest(
            f"{target.strip()!r} is a URL, not a host: give its host name or a range"
            + (f" ({host})" if host else "")
        )
    if _HOST_PORT_RE.match(text):
        raise InvalidRequest(
            f"{target.strip()!r}: give a host name or range without a port "
            f"({text.rsplit(':', 1)[0]}; every port of it is allowed)"
        )
    if ":" in text:
        raise InvalidRequest(f"{text!r}: IPv6 targets are not supported (boxes have IPv4 only)")
    if is_range(text):
        try:
            net = ipaddress.IPv4Network(text)  # strict: host bits set is an error
        except ValueError as exc:
            raise InvalidRequest(f"invalid IPv4 range {text!r}: {exc}") from None
        return str(net)
    if len(text) <= 253 and _DOMAIN_RE.match(text):
        return text
    raise InvalidRequest(
        f"invalid allowlist entry {target!r}: use an IPv4 address or CIDR (10.0.0.0/8), "
        "a domain (example.com) or a wildcard (*.example.com)"
    )


@dataclass(frozen=True)
class Closed:
    """A range no allowlist may reach into, and what it is (for the refusal's words)."""

    cidr: str
    what: str


def closed_ranges(refuse_non_public: bool, host: list[str]) -> list[Closed]:
    """What allowlists may not name unless the server's owner opened it: cloud metadata
    (never openable: see `openable`), the non-public ranges, the host's own networks."""
    found = [Closed(c, "a cloud metadata service") for c in METADATA]
    if refuse_non_public:
        found += [Closed(c, "not on the public internet") for c in NON_PUBLIC]
    found += [Closed(c, "one of the server's own networks") for c in host]
    return found


def closed_entry(
    policy: NetworkPolicy, closed: list[Closed], opened: tuple[str, ...]
) -> tuple[str, Closed] | None:
    """The first range of `policy`'s allowlist that reaches into a closed range where the
    owner's `opened` ranges do not cover it: (the entry, that range); None when all may be
    reached. 0.0.0.0/0 reaches into every closed range (allow-all is the public internet)."""
    opens = [ipaddress.IPv4Network(o, strict=False) for o in opened]
    for entry in policy.ranges:
        net = ipaddress.IPv4Network(entry)
        for c in closed:
            shut = ipaddress.IPv4Network(c.cidr, strict=False)
            if not net.overlaps(shut):
                continue
            inside = net if net.subnet_of(shut) else shut  # CIDRs that overlap nest
            if c.what.startswith("a cloud") or not any(inside.subnet_of(o) for o in opens):
                return entry, c
    return None


def policy(mode: str, allow: list[str] | tuple[str, ...] = ()) -> NetworkPolicy:
    if mode not in MODES:
        raise InvalidRequest(f"unknown network mode {mode!r}: use {', '.join(MODES)}")
    targets = tuple(dict.fromkeys(parse_target(t) for t in allow))
    if mode != "allowlist" and targets:
        raise InvalidRequest(f"mode {mode} takes no targets; targets imply the allowlist mode")
    if mode == "allowlist" and not targets:
        raise InvalidRequest(
            "an empty allowlist blocks everything, like deny-all: ask for deny-all explicitly"
        )
    return NetworkPolicy(mode, targets)
