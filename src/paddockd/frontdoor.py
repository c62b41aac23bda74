"""Paddock's front door on a VPS: Caddy on ports 80 and 443 with HTTPS for the server's
hostname, in front of paddockd, which itself listens on 127.0.0.1 only.

Caddy obtains and renews the certificate (ACME), redirects HTTP to HTTPS and passes
WebSockets (exec sessions, the desktop) and long streams through unbuffered. `tls
internal` uses Caddy's own local CA instead, for tests and private networks.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from pathlib import Path

CADDYFILE = Path("/etc/paddock/Caddyfile")
CADDY_DATA = Path("/var/lib/paddock/caddy")
# Caddy's admin API on a socket only root can reach (its default is a TCP port).
CADDY_ADMIN = "unix//run/paddock/caddy-admin.sock"

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def public_url(port: int, caddyfile: Path = CADDYFILE) -> str:
    """Where people reach this server: the configured hostname's HTTPS address, else the
    local address."""
    try:
        for line in caddyfile.read_text().splitlines():
            if line.endswith("{") and not line.startswith((" ", "{")):
                site = line.split()[0]
                return f"https://{site.removesuffix(':443')}"
    except OSError:
        pass
    return f"http://127.0.0.1:{port}"


def check_hostname(text: str) -> str:
    """The hostname as Caddy should serve it, or ValueError saying what is wrong."""
    host = text.strip().lower().rstrip(".")
    if "://" in host:
        raise ValueError(f"give the hostname alone, without a scheme: {host.split('://', 1)[1]}")
    if "/" in host or ":" in host:
        raise ValueError(
            f"give the hostname alone, without a port or path: {re.split('[/:]', host)[0]}"
        )
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        raise ValueError(
            f"{host} is an IP address: HTTPS certificates are issued for names; point a DNS "
            "name at this server and give that"
        )
    labels = host.split(".")
    if len(host) > 253 or len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{text!r} is not a hostname like paddock.example.com")
    return host


# Under systemd, Caddy runs as its own user (deploy/systemd/paddock-caddy.service).
SERVICE_DATA = Path("/var/lib/paddock-caddy")
SERVICE_ADMIN = "unix//run/paddock-caddy/admin.sock"


def as_service(door: FrontDoor) -> FrontDoor:
    return replace(door, data_dir=SERVICE_DATA, admin=SERVICE_ADMIN)


@dataclass(frozen=True)
class FrontDoor:
    hostname: str
    tls: str = "acme"  # or "internal": Caddy's local CA
    upstream: str = "127.0.0.1:7423"
    email: str = ""  # for the ACME account: expiry notices
    http_port: int = 80
    https_port: int = 443
    data_dir: Path = CADDY_DATA
    admin: str = CADDY_ADMIN

    def caddyfile(self) -> str:
        globals_ = [
            f"admin {self.admin}",
            f"storage file_system {self.data_dir}",
            # A local CA must never end up in the host's trust store behind the owner's back.
            "skip_install_trust",
        ]
        if self.http_port != 80:
            globals_.append(f"http_port {self.http_port}")
        if self.https_port != 443:
            globals_.append(f"https_port {self.https_port}")
        if self.email:
            globals_.append(f"email {self.email}")
        # Preview URLs (PORT-BOXID.HOST) get a certificate each, on their first request,
        # only if paddockd says such a preview exists: no one can make Caddy ask the CA for
        # names at will. (A wildcard certificate would need the DNS challenge.)
        globals_ += [
            "on_demand_tls {",
            f"    ask http://{self.upstream}/v1/previews/allowed",
            "}",
        ]
        port = f":{self.https_port}" if self.https_port != 443 else ""
        issuer = "internal " if self.tls == "internal" else ""
        proxy = [
            f"    reverse_proxy {self.upstream} {{",
            # Exec output, run logs, server-sent events: pass each write on.
            "        flush_interval -1",
            "    }",
        ]
        return "\n".join(
            [
                "# Written by `paddockd configure`; changes here are overwritten.",
                "{",
                *(f"    {line}" for line in globals_),
                "}",
                "",
                f"{self.hostname}{port} {{",
                *(["    tls internal"] if self.tls == "internal" else []),
                '    header Strict-Transport-Security "max-age=31536000"',
                *proxy,
                "}",
                "",
                f"*.{self.hostname}{port} {{",
                f"    tls {issuer}{{",
                "        on_demand",
                "    }",
                *proxy,
                "}",
                "",
            ]
        )

    @property
    def url(self) -> str:
        port = "" if self.https_port == 443 else f":{self.https_port}"
        return f"https://{self.hostname}{port}"

    @property
    def root_certificate(self) -> Path:
        """Where Caddy keeps its local CA's root (with `tls internal`)."""
        return self.data_dir / "pki" / "authorities" / "local" / "root.crt"
