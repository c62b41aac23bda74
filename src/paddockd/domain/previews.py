"""Preview URLs: a web server listening on a port inside a box, reached from a browser.

Two addresses lead to one: `https://PORT-BOXID.HOST/` where the server has a hostname (a
site of its own, so the box's pages share no origin with paddockd's), and the path form
`/preview/BOXID/PORT/` on paddockd's own address. A preview is private unless made
public: its URL then carries a secret, derived from the preview's id with the server's
key, so the URL can be shown again and dies with the preview."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from dataclasses import dataclass

from .errors import InvalidRequest

MAX_TTL = 30 * 86400
PATH_PREFIX = "/preview/"
# The query parameter a private URL carries the first time; it becomes a cookie.
TOKEN_PARAM = "paddock_preview"
COOKIE_PREFIX = "paddock_preview_"
# The header E2B's SDKs carry a private sandbox's traffic token in (services/e2b/hosts.py).
TRAFFIC_HEADER = "e2b-traffic-access-token"
_HOST_LABEL = re.compile(r"^([0-9]{1,5})-([0-9a-f]{12})$")
_PATH = re.compile(r"^/preview/([0-9a-f]{12})/([0-9]{1,5})(/.*)?$")


@dataclass(frozen=True)
class Preview:
    id: str
    box_id: str
    port: int
    public: bool
    created_at: float
    expires_at: float | None = None
    owner_id: str | None = None
    # Whether a request to it starts its stopped box (an E2B sandbox's only with autoResume).
    wakes: bool = True

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or time.time())


def validate_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise InvalidRequest(f"a port is 1-65535, not {port}")
    return port


def validate_ttl(ttl: int | None) -> int | None:
    """Seconds until the preview ends (None or 0: until removed)."""
    if not ttl:
        return None
    if not 60 <= ttl <= MAX_TTL:
        raise InvalidRequest(f"a preview lasts 60 s to {MAX_TTL // 86400} days (0: until removed)")
    return ttl


def secret(key: bytes, preview_id: str) -> str:
    mac = hmac.new(key, b"preview:" + preview_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:24]).decode().rstrip("=")


def check_secret(key: bytes, preview_id: str, given: str) -> bool:
    return bool(given) and hmac.compare_digest(secret(key, preview_id), given)


@dataclass(frozen=True)
class Target:
    """Where a request is going: a box's port, and the path the box's server gets."""

    box_id: str
    port: int
    path: str  # what the box's server sees (the path form's prefix removed)
    prefix: str  # "/preview/BOX/PORT" for the path form, "" for the host form


def target_of(host: str, path: str, base_host: str | None) -> Target | None:
    """The preview a request is for, from its Host header (`PORT-BOXID.` + the server's
    hostname) or its path (`/preview/BOXID/PORT/...`); None when it is for paddockd."""
    if base_host:
        name = host.rsplit(":", 1)[0].lower() if not host.startswith("[") else ""
        suffix = "." + base_host
        if name.endswith(suffix):
            label = _HOST_LABEL.match(name[: -len(suffix)])
            if label and 1 <= int(label[1]) <= 65535:
                return Target(label[2], int(label[1]), path or "/", "")
    if path.startswith(PATH_PREFIX):
        found = _PATH.match(path)
        if found and 1 <= int(found[2]) <= 65535:
            prefix = f"/preview/{found[1]}/{found[2]}"
            return Target(found[1], int(found[2]), found[3] or "/", prefix)
    return None
