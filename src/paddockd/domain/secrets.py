"""A user's own secrets, bound to hosts: a box holds a placeholder in `$NAME`, and the
credential gateway puts the real value in its place only in HTTPS requests to those hosts.
What a valid name, host, header and format are, and which secret a host is bound to."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidRequest

# The name is the box's environment variable: shell-safe, and no name paddockd or the
# agents set themselves (a secret may not pass for a provider's key or a box setting).
_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
_RESERVED = ("PADDOCK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_", "MOONSHOT_", "PRIME_", "KIMI_")
_RESERVED_NAMES = frozenset(
    {"PATH", "HOME", "USER", "SHELL", "DISPLAY", "LANG", "TERM", "HOSTNAME", "PWD"}
    | {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
    | {"LD_PRELOAD", "LD_LIBRARY_PATH", "PIP_CERT", "GIT_SSL_CAINFO"}
)
_HOST_RE = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_HEADER_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")  # an HTTP token
MAX_HOSTS = 16
MAX_VALUE = 4096
_VALUE_RE = re.compile(r"^[\x21-\x7e]+$")
_FORMAT_RE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")


def host_pattern(patterns: tuple[str, ...], host: str) -> str | None:
    """The pattern among `patterns` that `host` matches: itself, or `*.PARENT` for one
    label more (as a certificate's wildcard covers), None for none."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        if pattern == host:
            return pattern
        if pattern.startswith("*."):
            label, _, parent = host.partition(".")
            if label and parent == pattern[2:]:
                return pattern
    return None


@dataclass(frozen=True)
class SecretRule:
    """How one secret is used: where, and in which header form."""

    name: str
    hosts: tuple[str, ...]
    header: str | None = None  # set whole to `format` with the value; None: replaced in place
    format: str | None = None

    def binds(self, host: str) -> bool:
        return self.pattern_for(host) is not None

    def pattern_for(self, host: str) -> str | None:
        return host_pattern(self.hosts, host)

    def header_value(self, value: str) -> str:
        return (self.format or "{value}").replace("{value}", value)


def check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise InvalidRequest(
            f"invalid secret name {name!r}: it is the box's environment variable, so capital "
            "letters, digits and _ (up to 64, not starting with a digit), e.g. GITHUB_TOKEN"
        )
    if name in _RESERVED_NAMES or name.startswith(_RESERVED):
        raise InvalidRequest(
            f"{name} is a name Paddock or the box sets itself; choose another "
            "(provider keys are set with `paddock auth set`)"
        )
    return name


def check_hosts(hosts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(h.strip().lower().rstrip(".") for h in hosts))
    if not cleaned:
        raise InvalidRequest("a secret is bound to at least one host (--host api.github.com)")
    if len(cleaned) > MAX_HOSTS:
        raise InvalidRequest(f"a secret is bound to at most {MAX_HOSTS} hosts")
    for host in cleaned:
        if "://" in host or "/" in host or ":" in host:
            raise InvalidRequest(
                f"{host!r}: give the host name alone (no scheme, port or path); the secret "
                "is used in HTTPS requests to it"
            )
        if not _HOST_RE.match(host):
            raise InvalidRequest(
                f"invalid host {host!r}: a domain name (api.github.com) or a wildcard "
                "(*.example.com); IP addresses cannot be bound (a certificate names the host)"
            )
    return cleaned


def check_value(value: str) -> str:
    value = value.strip("\r\n")
    if not value or len(value) > MAX_VALUE:
        raise InvalidRequest(f"a secret's value is 1 to {MAX_VALUE} characters")
    if not _VALUE_RE.match(value):
        raise InvalidRequest(
            "a secret's value is printable ASCII without spaces (it goes into an HTTP header)"
        )
    return value


def check_header(header: str | None, fmt: str | None) -> tuple[str | None, str | None]:
    if header is None:
        if fmt is not None:
            raise InvalidRequest("--format goes with --header (the header it fills)")
        return None, None
    if not _HEADER_RE.match(header):
        raise InvalidRequest(f"invalid header name {header!r}")
    if header.lower() in ("host", "content-length", "transfer-encoding", "connection"):
        raise InvalidRequest(f"{header} cannot carry a secret")
    fmt = fmt if fmt is not None else "{value}"
    if "{value}" not in fmt or len(fmt) > 256 or not _FORMAT_RE.match(fmt):
        raise InvalidRequest(
            "--format is printable ASCII with {value} where the secret goes and no space at "
            "either end, e.g. 'Bearer {value}'"
        )
    return header, fmt
