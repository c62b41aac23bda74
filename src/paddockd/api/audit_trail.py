"""Records each HTTP call that changes something (any method but GET/HEAD/OPTIONS), and
each one refused (401, 403), into the audit log (services/audit.py): the API, the
dashboard's pages, E2B's API and its signed links. A preview's traffic is its box's, not
Paddock's, and is not recorded; nor are WebSockets (their handlers authenticate inside).

Nothing secret is recorded: no body, no query string, no header's value but a token's
first four characters after `pdk_`; route names that carry secrets (`{token}`, `{code}`,
`{key}`) and long path segments of routes without names (E2B's upload keys) are masked."""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paddock.wire.keys import from_e2b_key

from ..domain.audit import AuditEntry
from ..services.audit import AuditService, actor_of
from ..services.metrics import Metrics
from .deps import CALLER, SESSION_COOKIE

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
# A metric's method label: any other word a client sends counts as `other`.
_METHODS = _SAFE | {"POST", "PUT", "PATCH", "DELETE"}
_REFUSED = (401, 403)
_SECRET_PARAM = re.compile(r"(?i)token|code|key|secret|password|link")  # by its whole name
_LONG = re.compile(r"[A-Za-z0-9_=-]{20,}")
MASK = "…"
# Unrouted paths counted under their first folder; any other under `other`.
_FAMILIES = frozenset({"e2b", "files", "preview", "desktop", "dashboard", "clients"})


class AuditTrail:
    """Also counts and times every HTTP call for the metrics (services/metrics.py), by
    route template: reads included."""

    def __init__(
        self, app: ASGIApp, audit: AuditService | None, metrics: Metrics | None = None
    ) -> None:
        self.app = app
        self.audit = audit
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (self.audit is None and self.metrics is None):
            await self.app(scope, receive, send)
            return
        started = time.time()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            status = status or 500
            if self.audit is not None and (scope["method"] not in _SAFE or status in _REFUSED):
                self.audit.record(entry(scope, status, started))
            if self.metrics is not None:
                took = time.time() - started
                method = scope["method"] if scope["method"] in _METHODS else "other"
                self.metrics.call(method, _family(scope), status, took)


def entry(scope: Scope, status: int, at: float) -> AuditEntry:
    actor, user_id = actor_of(scope.get("state", {}).get(CALLER))
    client = scope.get("client")
    return AuditEntry(
        at=at,
        actor=actor,
        user_id=user_id,
        credential=_credential(scope),
        source=str(client[0]) if client else "",
        action=f"{scope['method']} {_route(scope)}"[:255],
        target=_target(scope)[:255],
        status=status,
    )


def _route(scope: Scope) -> str:
    parts = str(scope["path"]).split("/")
    route = scope.get("route")
    template = getattr(route, "path", None)
    if isinstance(template, str) and scope.get("endpoint") is not None:
        # The route's own path, after the prefix its router was included under (no route
        # here has a parameter that spans folders).
        named = template.split("/")[1:]
        if len(named) <= len(parts):
            return "/".join(parts[: len(parts) - len(named)] + named)
    # No route of the app's (E2B's gateway, an unknown path): the path, long parts masked.
    return "/".join(MASK if _LONG.fullmatch(p) else p for p in parts)


def _family(scope: Scope) -> str:
    """The route as a metric's label: its template, or for a path no route of the app's
    took (E2B's, unknown ones) its first folder, so no caller can add label values."""
    template = _route(scope)
    if scope.get("endpoint") is not None and scope.get("route") is not None:
        return template
    first = str(scope["path"]).split("/")[1:2]
    return f"/{first[0]}/…" if first and first[0] in _FAMILIES else "other"


def _target(scope: Scope) -> str:
    params: dict[str, Any] = scope.get("path_params") or {}
    if scope.get("route") is None or scope.get("endpoint") is None:
        params = {}
    pairs = [f"{k}={MASK if _SECRET_PARAM.fullmatch(k) else v}" for k, v in params.items()]
    sandbox = _header(scope, b"e2b-sandbox-id")
    if sandbox and not params:
        pairs.append(f"sandbox={sandbox[:64]}")
    return ", ".join(pairs)


def _credential(scope: Scope) -> str:
    """How the caller signed in, and which token (its first characters) where it was one."""
    bearer = _header(scope, b"authorization")
    if bearer.lower().startswith("bearer "):
        return _token_named("token", bearer[7:].strip())
    if key := _header(scope, b"x-api-key"):
        return _token_named("e2b key", from_e2b_key(key.strip()))
    if key := _header(scope, b"x-access-token"):
        key = from_e2b_key(key.strip())
        return "envd token" if key.startswith("pde_") else _token_named("e2b key", key)
    if SESSION_COOKIE in _header(scope, b"cookie"):
        return "session"
    if scope["path"] == "/files":
        return "signed link"
    return "none"


def _token_named(kind: str, token: str) -> str:
    # A token's first characters, as GitHub shows them: enough to tell tokens apart.
    return f"{kind} {token[:8]}…" if token.startswith("pdk_") else f"{kind} (not a token)"


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers") or ():
        if key == name:
            return str(value.decode("latin-1"))
    return ""
