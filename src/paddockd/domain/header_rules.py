"""E2B's secrets and its per-host network rules: a sandbox asks that every HTTPS request
to a host carry headers, whose values may name the owner's secrets as
`${e2b.secrets.NAME}`. The credential gateway sets those headers on the way out, with the
secrets' current values, so a value never enters the box. What a valid secret name, rule,
header and template are, and what a template becomes."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest
from .secrets import MAX_HOSTS, check_header, check_hosts, host_pattern

# E2B refuses braces and control characters in a name (it goes into the placeholder);
# Paddock also keeps it to what fits in a URL path segment, since `/secrets/{name}` finds it.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PLACEHOLDER_RE = re.compile(r"\$\{e2b\.secrets\.([^{}\x00-\x1f\x7f-\x9f]*)\}")
_OTHER_RE = re.compile(r"\$\{e2b\.[^}]*\}")
_TEMPLATE_RE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]{0,1022}[\x21-\x7e])?$")
# Hop-by-hop headers, and what would change how the request travels, not what it says.
_NOT_SET = frozenset(
    {"keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"}
    | {"proxy-authorization", "proxy-authenticate"}
)
MAX_HEADERS = 16  # per host
MAX_METADATA = 32


@dataclass(frozen=True)
class HeaderRule:
    """The headers set on every request to `host` (a name, or `*.parent` for one label
    more), each value a template that may name secrets."""

    host: str
    headers: tuple[tuple[str, str], ...]

    def pattern_for(self, host: str) -> str | None:
        return host_pattern((self.host,), host)

    def secrets(self) -> set[str]:
        return {n for _, t in self.headers for n in PLACEHOLDER_RE.findall(t)}


def check_secret_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidRequest(
            f"invalid secret name {name!r}: letters, digits, '.', '_' and '-' (up to 128, "
            "starting with a letter or digit), e.g. openai-api-key"
        )
    return name


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    found = dict(metadata or {})
    if len(found) > MAX_METADATA or not all(
        isinstance(k, str) and isinstance(v, str) and len(k) <= 128 and len(v) <= 1024
        for k, v in found.items()
    ):
        raise InvalidRequest(
            f"a secret's metadata is at most {MAX_METADATA} string keys (128) and values (1024)"
        )
    return found


def _template(host: str, name: str, value: object) -> str:
    if not isinstance(value, str) or not _TEMPLATE_RE.match(value):
        raise InvalidRequest(
            f"network rule for {host}: header {name}'s value must be 1 to 1024 printable "
            "ASCII characters, with no space at either end"
        )
    for found in PLACEHOLDER_RE.findall(value):
        check_secret_name(found)
    if _OTHER_RE.search(PLACEHOLDER_RE.sub("", value)):
        raise InvalidRequest(
            f"network rule for {host}: only ${{e2b.secrets.NAME}} placeholders are "
            "resolved by Paddock (workload identity tokens are not offered)"
        )
    return value


def _is_address(key: str) -> bool:
    try:
        ipaddress.ip_network(key, strict=False)
    except ValueError:
        return False
    return True


def parse_rules(raw: object) -> tuple[HeaderRule, ...]:
    """E2B's `network.rules`: {host: [{"transform": {"headers": {name: template}}}]}. The
    rules of a host apply in order (a later one's header replaces an earlier one's)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise InvalidRequest("network rules are an object: {host: [rule, ...]}")
    if len(raw) > MAX_HOSTS:
        raise InvalidRequest(f"network rules name at most {MAX_HOSTS} hosts")
    rules = []
    for key, listed in raw.items():
        if not isinstance(key, str) or _is_address(key):
            raise InvalidRequest(
                f"network rule for {key!r}: Paddock sets headers for host names only "
                "(the gateway answers TLS for a name), not for addresses or ranges"
            )
        (host,) = check_hosts([key])
        if not isinstance(listed, list):
            raise InvalidRequest(f"network rule for {host}: a list of rules")
        headers: dict[str, tuple[str, str]] = {}
        for rule in listed:
            transform = rule.get("transform") if isinstance(rule, dict) else None
            given = (transform or {}).get("headers") if isinstance(transform, dict) else None
            extra = set(rule) - {"transform"} if isinstance(rule, dict) else {"?"}
            if extra or (transform is not None and not isinstance(transform, dict)):
                raise InvalidRequest(
                    f"network rule for {host}: Paddock supports a rule's transform.headers only"
                )
            for name, value in (given or {}).items():
                check_header(str(name), None)
                if str(name).lower() in _NOT_SET:
                    raise InvalidRequest(f"network rule for {host}: {name} cannot be set")
                headers[str(name).lower()] = (str(name), _template(host, str(name), value))
        if len(headers) > MAX_HEADERS:
            raise InvalidRequest(f"network rule for {host}: at most {MAX_HEADERS} headers")
        rules.append(HeaderRule(host, tuple(headers.values())))
    return tuple(rules)


def dump_rules(rules: tuple[HeaderRule, ...]) -> dict[str, list[dict[str, Any]]]:
    """As E2B gives them back (one rule per host, its headers merged)."""
    return {r.host: [{"transform": {"headers": dict(r.headers)}}] for r in rules}


def render(template: str, values: Mapping[str, str]) -> str | None:
    """The template with each secret's value in place; None if one is missing."""
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        found = values.get(match.group(1))
        if found is None:
            missing = True
            return ""
        return found

    out = PLACEHOLDER_RE.sub(value, template)
    return None if missing else out
