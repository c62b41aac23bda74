"""The server's error tree. Each class carries a client-safe message and a stable code;
`api/errors.py` maps each class to exactly one HTTP status.

    PaddockError
    ├── NotFound            unknown box, type, path
    ├── InvalidRequest      bad names, sizes, paths, TTLs
    │   └── PayloadTooLarge a request body over its route's cap
    ├── Conflict            name taken, ambiguous reference, existing file
    ├── InvalidState        the box is not in a state that allows this
    ├── CapacityExceeded    the server has no room left
    │   └── StorageLow      the engine's disk is nearly full
    ├── Unauthorized        missing or wrong token
    │   └── TooManyAttempts failed logins, waiting before the next
    ├── EngineUnavailable   the box engine does not answer
    ├── DesktopFailed       the box's desktop did not start or does not answer
    └── IsolationFailed     a box's network isolation could not be applied
"""

from __future__ import annotations


class PaddockError(Exception):
    code = "internal"

    def __init__(self, message: str, details: object | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(PaddockError):
    code = "not_found"


class InvalidRequest(PaddockError):
    code = "invalid_request"


class PayloadTooLarge(InvalidRequest):
    code = "payload_too_large"


class Conflict(PaddockError):
    code = "conflict"


class InvalidState(PaddockError):
    code = "invalid_state"


class SnapshotTooLarge(InvalidState):
    """A snapshot would write more than the box's own disk holds (sparse files are written
    out whole in one): refused, so a box cannot fill the disk every box shares."""


class CapacityExceeded(PaddockError):
    code = "capacity_exceeded"


class StorageLow(CapacityExceeded):
    code = "storage_low"


class Unauthorized(PaddockError):
    code = "unauthorized"


class TooManyAttempts(Unauthorized):
    code = "too_many_attempts"


class Forbidden(PaddockError):
    """Owner-only administration asked by a member. Never for a resource of another user's:
    that is NotFound, so a refusal does not tell it exists."""

    code = "forbidden"


class EngineUnavailable(PaddockError):
    code = "engine_unavailable"


class DesktopFailed(PaddockError):
    code = "desktop_failed"


class IsolationFailed(PaddockError):
    code = "isolation_failed"
