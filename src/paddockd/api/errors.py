"""Every error leaves the API as JSON `{"error": {"code", "message", "details"}}`;
each error class maps to exactly one status."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from paddock.wire.models import ErrorBody

from ..domain import errors as e

log = logging.getLogger("paddockd.api")


# Documented on every route: what each status means here (the body is always ErrorBody).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "invalid_request: a bad name, size, path, TTL or policy",
        401: "unauthorized: no token, or a wrong or revoked one",
        403: "forbidden: the owner's administration, asked by a member",
        404: "not_found: no such box, snapshot, drive, run or path",
        405: "method_not_allowed",
        409: "conflict, invalid_state or capacity_exceeded",
        413: "payload_too_large: a body over the route's cap",
        429: "too_many_attempts: failed logins; retry after details.retry_after seconds",
        422: "invalid_request: the body or parameters do not match the schema",
        500: "internal: a fault of the server; see its log",
        502: "desktop_failed: the box's desktop did not start",
        503: "engine_unavailable or isolation_failed",
        507: "storage_low: the engine's disk is nearly full; new boxes and snapshots wait",
    }.items()
}


def error_body(code: str, message: str, details: object | None = None) -> dict[str, object]:
    return {"error": {"code": code, "message": message, "details": details}}


def status_of(exc: e.PaddockError) -> int:
    return exc.status


def error_response(exc: e.PaddockError) -> JSONResponse:
    """The answer for an error of ours, from a route or from a middleware in front of them."""
    if status_of(exc) >= 500:
        log.error("%s: %s", exc.code, exc.message)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, e.Unauthorized) else None
    return JSONResponse(
        error_body(exc.code, exc.message, exc.details), status_of(exc), headers=headers
    )


def allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install(app: FastAPI) -> None:
    @app.exception_handler(e.PaddockError)
    async def paddock_error(_: Request, exc: e.PaddockError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in err['loc'] if p != 'body')}: {err['msg']}"
            for err in exc.errors()
        ]
        return JSONResponse(
            error_body("invalid_request", "; ".join(problems), {"errors": problems}), 422
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # RFC 9110: list every method of the path. Starlette names only those of the
            # first route that matched it, and each method is a route of its own here.
            headers["Allow"] = ", ".join(allowed_methods(request))
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(
            error_body("internal", "internal server error; see the paddockd log"), 500
        )


def client_may_leave(
    endpoint: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    """A WebSocket endpoint whose client may go at any moment (a closed tab, a dropped
    line, a refusal it did not wait for): that ends the endpoint quietly, never with a
    traceback in the log. Every other failure is reported as before."""

    @functools.wraps(endpoint)
    async def quiet(*args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(WebSocketDisconnect):
            await endpoint(*args, **kwargs)

    return quiet
