"""The error tree of the wire contract: paddockd raises these (its own few on top, in
`paddockd.domain.errors`) and answers each with its `status` and stable `code`; clients get
the same class back from the answer (`error_from_body`).

PaddockError
├── ConnectionFailed      the server could not be reached
├── AuthenticationFailed  401: missing or wrong token
│   └── TooManyAttempts   429: failed logins; wait details['retry_after'] seconds
├── Forbidden             403: the owner's administration (members), asked by a member
├── NotFound              404: unknown box, type, path …
├── InvalidRequest        400/422: bad names, sizes, paths, TTLs
│   └── PayloadTooLarge   413: a request body over the route's cap (JSON: 1 MiB)
├── Conflict              409: name taken, ambiguous reference, file exists
├── InvalidState          409: e.g. exec on a stopped box
├── CapacityExceeded      409: the server has no room for the box
│   └── StorageLow        507: the engine's disk is nearly full (no new boxes, snapshots)
├── EngineUnavailable     503: the box engine is down
├── DesktopFailed         502: the box's desktop did not start (message: its log tail)
├── IsolationFailed       503: a box's network isolation could not be applied
└── ServerError           500: anything else the server reports
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class PaddockError(Exception):
    code = "internal"
    status = 500  # the HTTP status paddockd answers it with

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class ConnectionFailed(PaddockError):
    """The client's own: the server could not be reached (paddockd never raises it)."""

    code = "connection_failed"


class AuthenticationFailed(PaddockError):
    code = "unauthorized"
    status = 401


class TooManyAttempts(AuthenticationFailed):
    code = "too_many_attempts"
    status = 429


class Forbidden(PaddockError):
    code = "forbidden"
    status = 403


class NotFound(PaddockError):
    code = "not_found"
    status = 404


class InvalidRequest(PaddockError):
    code = "invalid_request"
    status = 400


class PayloadTooLarge(InvalidRequest):
    code = "payload_too_large"
    status = 413


class Conflict(PaddockError):
    code = "conflict"
    status = 409


class InvalidState(PaddockError):
    code = "invalid_state"
    status = 409


class CapacityExceeded(PaddockError):
    code = "capacity_exceeded"
    status = 409


class StorageLow(CapacityExceeded):
    code = "storage_low"
    status = 507


class EngineUnavailable(PaddockError):
    code = "engine_unavailable"
    status = 503


class DesktopFailed(PaddockError):
    code = "desktop_failed"
    status = 502


class IsolationFailed(PaddockError):
    code = "isolation_failed"
    status = 503


class ServerError(PaddockError):
    """The client's own: the server reported a fault of its own (paddockd raises the base)."""


_BY_CODE: dict[str, type[PaddockError]] = {
    cls.code: cls
    for cls in (
        AuthenticationFailed,
        TooManyAttempts,
        Forbidden,
        NotFound,
        InvalidRequest,
        PayloadTooLarge,
        Conflict,
        InvalidState,
        CapacityExceeded,
        StorageLow,
        EngineUnavailable,
        DesktopFailed,
        IsolationFailed,
        ServerError,
    )
}


def error_from_body(
    status: int, body: Any, *, server: str | None = None, path: str | None = None
) -> PaddockError:
    """Turn an API error body (`{"error": {"code", "message", "details"}}`) into an exception.
    `server` and `path` (the request's) name what answered when the body is not Paddock's."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return _not_paddock(status, body, server, path)
    code = str(err.get("code", "internal"))
    cls = _BY_CODE.get(code)
    if cls is None:
        # Codes added by a newer server still land in the right branch of the tree.
        cls = {401: AuthenticationFailed, 404: NotFound, 409: Conflict, 503: EngineUnavailable}.get(
            status, InvalidRequest if 400 <= status < 500 else ServerError
        )
    return cls(str(err.get("message", "")), code=code, details=err.get("details"))


def _not_paddock(status: int, body: Any, server: str | None, path: str | None) -> ServerError:
    """An error without Paddock's body: another web server, or a proxy in front of one."""
    where = f" for {path}" if path else ""
    if status in (404, 405):  # Paddock knows every /v1 path it is asked for
        return ServerError(
            f"{server or 'the URL'} does not look like a Paddock server (HTTP {status}{where})"
        )
    text = " ".join(str(body).split())[:200]
    return ServerError(f"server answered HTTP {status}{where}" + (f": {text}" if text else ""))
