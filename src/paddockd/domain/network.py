"""A box's egress policy: allow-all, deny-all, or an allowlist of IPv4 ranges."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass

from .errors import InvalidRequest

MODES = ("allow-all", "deny-all", "allowlist")
_DOMAIN_RE = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


@dataclass(frozen=True)
class NetworkPolicy:
    mode: str = "allow-all"
    allow: tuple[str, ...] = ()  # IPv4 CIDRs, normalised

    def to_json(self) -> str:
        return json.dumps({"mode": self.mode, "allow": list(self.allow)})

    @classmethod
    def from_json(cls, text: str | None) -> NetworkPolicy:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(str(data.get("mode", "allow-all")), tuple(data.get("allow", [])))


def parse_target(target: str) -> str:
    """An allowlist entry: an IPv4 address or CIDR (host bits must be zero)."""
    text = target.strip()
    if not text:
        raise InvalidRequest("an empty allowlist entry")
    if ":" in text:
        raise InvalidRequest(f"{text!r}: IPv6 targets are not supported (boxes have IPv4 only)")
    if re.fullmatch(r"[0-9./]+", text):
        try:
            net = ipaddress.IPv4Network(text)  # strict: host bits set is an error
        except ValueError as exc:
            raise InvalidRequest(f"invalid IPv4 range {text!r}: {exc}") from None
        return str(net)
    if _DOMAIN_RE.match(text.lower()):
        raise InvalidRequest(
            f"{text!r}: domain rules need Paddock's DNS filter, which this server does not "
            "run yet; allow the IPv4 ranges instead"
        )
    raise InvalidRequest(f"invalid allowlist entry {text!r}: use an IPv4 address or CIDR")


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
