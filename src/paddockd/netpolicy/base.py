"""What the services need from the network layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..domain.network import Closed, NetworkPolicy


@dataclass(frozen=True)
class BoxAddress:
    """A running box as the network sees it."""

    box_id: str
    ip: str
    policy: NetworkPolicy
    # What the engine says of its container: the bridge port of that container's network
    # namespace may send only from this MAC and address.
    container_id: str = ""
    mac: str = ""
    # The engine's word for its init's host pid, where it was asked (0: not known): it
    # saves asking again, and is checked as an answer to that would be. Not part of what
    # the rules are made of.
    pid: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Flow:
    """New connections from a box to one destination, seen by the rules since last asked."""

    box_ip: str
    address: str
    proto: str  # tcp | udp
    port: int
    verdict: Literal["allowed", "refused"]
    count: int


class NetworkRules(Protocol):
    async def sync(self, boxes: list[BoxAddress]) -> dict[str, str]:
        """Enforce exactly these boxes' policies; idempotent, atomic, and it heals a
        flushed ruleset. Returns the boxes whose bridge port could not be locked to them
        (box id -> why): their traffic is dropped until a later sync succeeds."""
        ...

    async def sync_box(self, box_id: str, box: BoxAddress | None) -> dict[str, str] | None:
        """Enforce one box's policy (`box`), or none for it (None), every other box's as
        the last sync left it: what a create, a claim, a start, a policy change or a delete
        needs, at a cost that does not grow with the boxes. Returns what `sync` does for
        this box, or None where only a full `sync` can do it."""
        ...

    def box_at(self, ip: str) -> BoxAddress | None:
        """The box enforced at this address, if any."""
        ...

    async def written(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) until the rules were first written since
        paddockd started: before that, no box is known at any address."""
        ...

    async def closed(self) -> list[Closed]:
        """The ranges allowlists may not reach into unless the owner opened them: cloud
        metadata, the non-public ranges (where refused), the host's own networks."""
        ...

    async def admit(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        """Let this box reach these (address, seconds) pairs, learned from DNS answers."""
        ...

    async def intercept(self, box_ip: str, addresses: list[tuple[str, int]]) -> None:
        """Send this box's HTTPS to these (address, seconds) through the credential
        gateway: addresses of hosts a secret attached to the box is bound to."""
        ...

    async def flows(self) -> list[Flow]:
        """Connection attempts seen since the last call."""
        ...

    async def forget_flows(self, ip: str) -> None:
        """Drop the tracked connections of an address a box has just been given: they
        were its previous box's."""
        ...


class Resolver(Protocol):
    """The DNS filter boxes ask (netpolicy/dns.py): served on the bridge's address."""

    async def start(self, host: str, port: int) -> None: ...

    async def close(self) -> None: ...
