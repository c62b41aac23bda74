"""What the credential gateway's listeners ask of the services: whether a box may use a
key or secret, what to put in place of its placeholders, and where it may connect. Plain
data: the listeners own the wire (TLS, HTTP framing), the services own the decisions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .substitute import Swap


@dataclass(frozen=True)
class Grant:
    """A request let through: swaps for its placeholders, where it goes (a provider's
    base URL; None for a bound host, which keeps its own), and `record(status)` to call
    with the upstream's answer (the use's line in the log)."""

    swaps: dict[bytes, Swap] = field(default_factory=dict)
    upstream: str | None = None
    record: Callable[[int], None] | None = None
    # Headers set whole on the request (any of the box's of those names dropped), and the
    # real values they hold, masked in the answer as swapped ones are.
    headers: tuple[tuple[bytes, bytes], ...] = ()
    masked: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Denied:
    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Asked:
    """A request as the gateway saw it from a box."""

    box_ip: str
    method: str
    path: str  # without its query (never logged: it may carry tokens)
    placeholders: frozenset[bytes]


class Grants(Protocol):
    async def refresh(self) -> None:
        """Read afresh what is attached to which box (once at start, then on changes)."""
        ...

    def is_box(self, ip: str) -> bool:
        """Whether a running box has this address (anything else is not served)."""
        ...

    def egress(self, box_ip: str) -> bool:
        """Whether the box's policy lets it connect out at all now (not deny-all)."""
        ...

    def binding(self, box_ip: str, host: str) -> str | None:
        """The host pattern of a secret attached to this box that `host` matches, if any:
        its TLS is then answered by the gateway (with a certificate for that pattern);
        every other host's passes through untouched."""
        ...

    async def for_provider(self, asked: Asked, provider: str) -> Grant | Denied: ...

    async def for_host(self, asked: Asked, host: str) -> Grant | Denied: ...

    async def address_of(self, host: str, port: int) -> str | Denied:
        """The address to connect to for `host`, if it is one paddockd may reach on a box's
        behalf (never the host's own networks, cloud metadata or, unless the owner opened
        them, non-public ranges)."""
        ...
