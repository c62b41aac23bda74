"""Events about boxes, and webhooks that deliver them: what an event is, which kinds
there are, what a webhook's address may be, and how a delivery is signed.

A delivery is a POST of the event as JSON, signed as Stripe and GitHub sign theirs: the
header `Paddock-Signature: t=TIMESTAMP,v1=HEX`, HEX being HMAC-SHA256 under the webhook's
secret of `TIMESTAMP.BODY`. A receiver checks the signature and that TIMESTAMP is recent
(`verify` below; five minutes), so a delivery cannot be forged, altered or replayed
later."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import time
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import urlsplit

from .errors import InvalidRequest

EventType = Literal[
    "box.created",
    "box.started",
    "box.stopped",
    "box.deleted",
    "box.error",
    "snapshot.taken",
    "run.finished",
    "egress.refused",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
# Why a box stopped (`box.stopped`'s `reason`); a failure is `box.error`.
StopReason = Literal["user", "ttl", "idle"]
SIGNATURE_HEADER = "Paddock-Signature"
REPLAY_WINDOW = 300  # seconds a receiver should accept a signature's timestamp for
MAX_URL = 2048
MAX_WEBHOOKS_PER_USER = 20
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class Event:
    """Something that happened to a box: `data` holds what the kind adds (a stop's reason,
    a snapshot's number, a run's status)."""

    id: str
    type: str
    at: float
    box_id: str
    box_name: str
    owner_id: str | None
    data: dict[str, str | int | None] = field(default_factory=dict)

    def body(self) -> bytes:
        """What a delivery carries: no owner id (the receiver's user knows whose it is)."""
        payload = {
            "id": self.id,
            "type": self.type,
            "at": self.at,
            "box": {"id": self.box_id, "name": self.box_name},
            "data": self.data,
        }
        return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Webhook:
    id: str
    owner_id: str | None  # None: the server owner's (every box's events)
    url: str
    events: tuple[str, ...]  # () for every kind
    created_at: float

    def wants(self, event_type: str) -> bool:
        return not self.events or event_type in self.events


def check_events(events: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    wanted = tuple(dict.fromkeys(e.strip() for e in events if e.strip()))
    unknown = [e for e in wanted if e not in EVENT_TYPES]
    if unknown:
        raise InvalidRequest(
            f"unknown event type(s) {', '.join(unknown)}: one of {', '.join(EVENT_TYPES)}"
        )
    return wanted


def check_url(url: str) -> str:
    """An http(s) address with a host and no credentials in it (they would be logged and
    shown back: a receiver checks the signature instead)."""
    if len(url) > MAX_URL:
        raise InvalidRequest(f"a webhook's URL is at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidRequest(f"not a URL: {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest("a webhook's URL is http:// or https:// with a host")
    if parts.username or parts.password:
        raise InvalidRequest("no user or password in a webhook's URL: check its signature")
    if port == 0 or any(c in url for c in "\r\n\t "):
        raise InvalidRequest(f"not a URL: {url!r}")
    try:
        url.encode("ascii")  # a request line is ASCII: encode a path's other characters
        parts.hostname.encode("idna")
    except UnicodeError:
        raise InvalidRequest(
            f"not a URL a request can be sent to: {url!r} (percent-encode the path; "
            "hostnames of at most 63 characters a label)"
        ) from None
    return url


def public_address(address: str) -> bool:
    """Whether a member's webhook may be delivered to `address`: a public one only, never
    this host, its boxes, a private network or cloud metadata (the server owner's may)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4 carried in IPv6 (mapped, NAT64, 6to4, compatible): judged as that IPv4.
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        elif ip in _NAT64 or int(ip) >> 32 == 0:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.is_global


def sign(secret: str, body: bytes, at: int | None = None) -> str:
    """The signature header's value for `body` sent at `at` (now)."""
    stamp = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256)
    return f"t={stamp},v1={mac.hexdigest()}"


def verify(secret: str, body: bytes, header: str, now: float | None = None) -> bool:
    """What a receiver does (written here for the docs and tests): the signature over the
    body with the timestamp it names, and the timestamp within the replay window."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        stamp = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - stamp) > REPLAY_WINDOW:
        return False
    expected = sign(secret, body, stamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
