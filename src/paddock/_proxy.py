"""Which proxy, if any, carries the connections to a Paddock server: one decision for the
clients and their WebSocket sessions, read from the environment as curl
reads it.

- `https_proxy` / `HTTPS_PROXY` for an https:// server, `http_proxy` / `HTTP_PROXY` for
  an http:// one (the lowercase name first; an empty value counts as unset). Only
  http:// proxies: `http://[USER:PASSWORD@]HOST[:PORT]`, the scheme optional, the port
  80 when left out. Credentials go to the proxy as Basic authentication.
- `no_proxy` / `NO_PROXY`: comma- (or space-) separated entries, each a host name that
  also covers its subdomains (`example.com`, `.example.com` and `*.example.com` alike),
  an IP address, a CIDR range (`10.0.0.0/8`), optionally with `:PORT` (then only that
  port), or `*` for every host. Names are compared as written, never resolved.
- Loopback (`localhost`, `*.localhost`, 127.0.0.0/8, ::1) never goes through a proxy,
  whatever NO_PROXY says, as Go's HTTP client (the Docker CLI, kubectl) does: through a
  proxy, 127.0.0.1 would name the proxy's own machine, and a machine-wide https_proxy
  must not break `paddock` on the server itself.

Only the environment is read, never Windows' or macOS' system proxy settings.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import unquote, urlsplit

from .wire.errors import ConnectionFailed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# A ConnectionFailed whose cause is the proxy, not the server: the CLI's hint differs.
PROXY_FAILED = "proxy_failed"

_VARIABLES = {"https": ("https_proxy", "HTTPS_PROXY"), "http": ("http_proxy", "HTTP_PROXY")}
_NO_PROXY = ("no_proxy", "NO_PROXY")


class Proxy:
    """An http:// proxy, as a variable named it."""

    __slots__ = ("authorization", "host", "port", "variable")

    def __init__(self, host: str, port: int, authorization: str | None, variable: str) -> None:
        self.host = host
        self.port = port
        # The value of a Proxy-Authorization header, or None.
        self.authorization = authorization
        self.variable = variable

    @property
    def where(self) -> str:
        return f"{authority(self.host, self.port)} ({self.variable})"

    def __repr__(self) -> str:  # no credentials
        return f"Proxy({self.where})"


def authority(host: str, port: int) -> str:
    """`host:port` as a request target or Host header writes it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def from_env(
    scheme: str, host: str, port: int, environ: Mapping[str, str] | None = None
) -> Proxy | None:
    """The proxy for a server at scheme://host:port, or None to connect directly.
    Raises ConnectionFailed for a proxy variable paddock cannot use."""
    env = os.environ if environ is None else environ
    named = _first(env, _VARIABLES[scheme])
    if named is None or is_loopback(host):
        return None
    no_proxy = _first(env, _NO_PROXY)
    if no_proxy is not None and bypass(host, port, no_proxy[1]):
        return None
    return parse(named[1], named[0])


def parse(value: str, variable: str) -> Proxy:
    """A proxy variable's value; its password never appears in an error."""
    url = value if "://" in value else f"http://{value}"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    shown = f"{scheme}://{parts.hostname or ''}"
    if scheme != "http":
        raise ConnectionFailed(
            f"{variable} names a {scheme}:// proxy ({shown}); paddock goes through http:// "
            "proxies only (NO_PROXY=HOST connects to HOST directly)",
            code=PROXY_FAILED,
        )
    try:
        port = parts.port or 80
    except ValueError:
        port = 0
    if not parts.hostname or not 0 < port < 65536:
        raise ConnectionFailed(
            f"{variable} is not a proxy URL (http://[USER:PASSWORD@]HOST[:PORT])",
            code=PROXY_FAILED,
        )
    authorization = None
    if parts.username is not None:
        import binascii  # only with credentials: base64's module costs more to import

        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + binascii.b2a_base64(pair, newline=False).decode("ascii")
    return Proxy(parts.hostname, port, authorization, variable)


def _ip(host: str) -> bytes | None:
    """The packed address of an IP literal (4 or 16 bytes), None for a name."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
    return None


def is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    packed = _ip(host)
    if packed is None:
        return False
    if len(packed) == 16 and packed[:12] == bytes(10) + b"\xff\xff":
        packed = packed[12:]  # ::ffff:127.0.0.1 is IPv4's loopback too
    return packed[0] == 127 if len(packed) == 4 else packed == bytes(15) + b"\x01"


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port`, `[v6]`, or a bare IPv6 address (curl's spelling)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return host, int(port) if port.isdigit() else None
    host, sep, port = entry.rpartition(":")
    if sep and ":" not in host and port.isdigit():
        return host, int(port)
    return entry, None


def _in_range(packed: bytes, cidr: str) -> bool:
    import ipaddress  # ~6 ms: only for a CIDR entry and an IP-literal server

    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False  # as curl and Go do, a malformed entry is skipped
    return ipaddress.ip_address(packed) in network


def bypass(host: str, port: int, no_proxy: str) -> bool:
    """Does the NO_PROXY value `no_proxy` send host:port directly?"""
    host = host.lower().rstrip(".")
    packed = _ip(host)
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        name, only_port = _split_port(entry)
        if only_port is not None and only_port != port:
            continue
        if packed is not None:
            # An address matches an equal address or a range, never a name's suffix:
            # `2.3.4` must not cover 1.2.3.4.
            if "/" in name:
                if _in_range(packed, name):
                    return True
            elif _ip(name) == packed:
                return True
            continue
        name = name.lstrip("*").lstrip(".").rstrip(".")
        if name and (host == name or host.endswith(f".{name}")):
            return True
    return False
