"""The server's error tree: the wire contract's (`paddock.wire.errors`), raised as clients
will see them, and the few refinements only the server tells apart. Each class carries a
client-safe message, a stable `code` and the HTTP `status` `api/errors.py` answers with.

    PaddockError            internal: a fault of the server (500)
    ├── NotFound            unknown box, type, path
    ├── InvalidRequest      bad names, sizes, paths, TTLs
    │   └── PayloadTooLarge a request body over its route's cap
    ├── Conflict            name taken, ambiguous reference, existing file
    ├── InvalidState        the box is not in a state that allows this
    │   └── SnapshotTooLarge  a snapshot would write more than the box's disk
    ├── CapacityExceeded    the server has no room left
    │   └── StorageLow      the engine's disk is nearly full
    ├── Unauthorized        missing or wrong token
    │   └── TooManyAttempts failed logins, waiting before the next
    ├── Forbidden           the owner's administration, asked by a member
    ├── EngineUnavailable   the box engine does not answer
    ├── DesktopFailed       the box's desktop did not start or does not answer
    └── IsolationFailed     a box's network isolation could not be applied

A member asking for another user's resource gets NotFound, never Forbidden, so that a
refusal does not tell it exists.
"""

from __future__ import annotations

from paddock.wire.errors import AuthenticationFailed as Unauthorized
from paddock.wire.errors import (
    CapacityExceeded,
    Conflict,
    DesktopFailed,
    EngineUnavailable,
    Forbidden,
    InvalidRequest,
    InvalidState,
    IsolationFailed,
    NotFound,
    PaddockError,
    PayloadTooLarge,
    StorageLow,
    TooManyAttempts,
)

__all__ = [
    "CapacityExceeded",
    "Conflict",
    "DesktopFailed",
    "EngineUnavailable",
    "Forbidden",
    "InvalidRequest",
    "InvalidState",
    "IsolationFailed",
    "NotFound",
    "PaddockError",
    "PayloadTooLarge",
    "SnapshotTooLarge",
    "StorageLow",
    "TooManyAttempts",
    "Unauthorized",
]


class SnapshotTooLarge(InvalidState):
    """A snapshot would write more than the box's own disk holds (sparse files are written
    out whole in one): refused, so a box cannot fill the disk every box shares."""
