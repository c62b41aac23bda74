"""The E2B-compatible API under /e2b: an ASGI middleware ahead of Paddock's own API (like the
preview proxy), since E2B authenticates with its own headers (X-API-Key, X-Access-Token),
not Paddock's Bearer token, and shapes its errors its own way.

    /e2b/...                          the control plane (E2B_API_URL=https://HOST/e2b)
    /e2b/sandbox/process.Process/*    envd over Connect  (E2B_SANDBOX_URL=https://HOST/e2b/sandbox;
    /e2b/sandbox/filesystem.Filesystem/*                  the box comes from E2b-Sandbox-Id)
    /e2b/sandbox/files, /health       envd's REST side
    /e2b/template-files/KEY/HASH      a template build's files (the link's key authenticates)
    /e2b/volumecontent/VOLUME/...     a volume's files (E2B_VOLUME_API_URL; its token authenticates)
    /files?path=..&signature=..       envd's signed file links (files.download_url, upload_url;
                                      the signature authenticates: services/e2b/envd_tokens.py)

Every call (but those uploads) is authenticated here, before anything reads its body:
without a valid key the answer is 401 and the body stays unread (it may be hundreds of
MiB, or a small gzip that inflates to gigabytes). Then the control plane's JSON bodies
are capped at 1 MiB, envd's Connect messages at 4 MiB (connectrpc's own cap, decompressed
included), and uploads stream into the box (api/e2b/uploads.py).

Anything else under /e2b is answered with a JSON error naming the call that is not
supported, so a newer SDK fails clearly instead of hanging."""

from __future__ import annotations

import asyncio
import json
import logging

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.filesystem.filesystem_connect import FilesystemASGIApplication
from e2b.envd.process.process_connect import ProcessASGIApplication
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...domain.errors import PaddockError, Unauthorized
from ...services.e2b.processes import ProcessRegistry
from ...services.e2b.service import E2BService, api_key
from ..deps import CALLER
from ..errors import status_of
from ..gate import BodyLimit, has_body
from . import control, files, secrets, templates, volume_content
from .envd import SANDBOX_HEADER, PaddockErrors
from .filesystem import FilesystemService
from .process import ProcessService

PREFIX = "/e2b"
SANDBOX = "/sandbox"
MAX_JSON_BODY = 1 << 20
# Routes whose bodies stream on (they never hold them whole): envd's uploads, and a
# template build's files.
_STREAMING = (
    ("POST", "/sandbox/files"),
    ("POST", files.SIGNED),
    ("PUT", templates.UPLOADS + "/{key}/{files_hash}"),
    ("PUT", volume_content.PREFIX + "/{volume_id}/file"),
)
# E2B's SDK makes its signed file links `https://HOST/files?...` (envd's path, at the root).
SIGNED_LINKS = "/files"
log = logging.getLogger("paddockd.e2b")


def error(status: int, code: str, message: str) -> JSONResponse:
    # E2B's error body is {code: HTTP status, message}; error_code is Paddock's stable code.
    return JSONResponse({"code": status, "message": message, "error_code": code}, status)


def _answer(exc: PaddockError, scope: Scope) -> ASGIApp:
    response = error(status_of(exc), exc.code, exc.message)
    if has_body(scope):  # see api/gate.py's `refusal`
        response.headers["connection"] = "close"
    return response


def _rest_app(e2b: E2BService) -> FastAPI:
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.e2b = e2b
    # Templates' routes first: `DELETE /templates/tags` is theirs, not a template's.
    app.include_router(templates.router)
    app.include_router(control.router)
    app.include_router(files.router)
    app.include_router(secrets.router)
    app.include_router(volume_content.router)

    @app.exception_handler(PaddockError)
    async def paddock_error(request: Request, exc: PaddockError) -> JSONResponse:
        response = error(status_of(exc), exc.code, exc.message)
        if has_body(request.scope):  # a refused upload's body is not read on: see _answer
            response.headers["connection"] = "close"
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        where = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg')}"
            for err in exc.errors()
        )
        return error(400, "invalid_request", f"invalid request: {where}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            return error(
                501,
                "unsupported",
                f"Paddock's E2B API does not support {request.method} {PREFIX}{request.url.path}",
            )
        return error(exc.status_code, "http_error", str(exc.detail))

    return app


class E2BGateway:
    def __init__(self, app: ASGIApp, e2b: E2BService | None) -> None:
        self.app = app
        self.e2b = e2b
        if e2b is None:
            return
        self.registry = ProcessRegistry()
        self.rest = BodyLimit(_rest_app(e2b), MAX_JSON_BODY, _STREAMING, _answer)
        errors = [PaddockErrors()]
        process = ProcessASGIApplication(ProcessService(e2b, self.registry), interceptors=errors)
        filesystem = FilesystemASGIApplication(FilesystemService(e2b), interceptors=errors)
        self.rpc: dict[str, ASGIApp] = {process.path: process, filesystem.path: filesystem}
        self.methods = {
            process.path: _methods(ProcessService),
            filesystem.path: _methods(FilesystemService),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if self.e2b is not None and scope["type"] == "http" and path == SIGNED_LINKS:
            # No key: the route checks the link's signature before it reads any body.
            inner = {**scope, "path": files.SIGNED, "root_path": ""}
            inner.pop("raw_path", None)
            await self.rest(inner, receive, send)
            return
        if (
            self.e2b is None
            or scope["type"] != "http"
            or not (path == PREFIX or path.startswith(PREFIX + "/"))
        ):
            await self.app(scope, receive, send)
            return
        rest = path[len(PREFIX) :]
        # A template's file upload comes without the API key (the SDK sends it as to a
        # storage bucket), and a volume's content with the volume's token: the route
        # checks the link's key, or the token, before the body is read.
        if not rest.startswith((templates.UPLOADS + "/", volume_content.PREFIX + "/")):
            try:
                headers = Headers(scope=scope)
                # An envd access token opens its own sandbox's envd calls, nothing else.
                envd = rest.startswith(SANDBOX + "/")
                sandbox = headers.get(SANDBOX_HEADER) if envd else None
                user = await self.e2b.authenticate(api_key(headers.get), sandbox)
            except Unauthorized as exc:
                await _answer(exc, scope)(scope, receive, send)
                return
            scope.setdefault("state", {})[CALLER] = user
        if rest.startswith(SANDBOX + "/"):
            service, _, method = rest[len(SANDBOX) :].rpartition("/")
            if service in self.rpc:
                if method not in self.methods[service]:
                    await _unimplemented(scope, send, f"{service[1:]}/{method}")
                    return
                inner = {**scope, "path": service + "/" + method, "raw_path": None}
                await _cancelled_on_disconnect(self.rpc[service], inner, receive, send)
                return
        inner = {**scope, "path": rest or "/", "root_path": scope.get("root_path", "") + PREFIX}
        inner.pop("raw_path", None)
        await self.rest(inner, receive, send)


async def _cancelled_on_disconnect(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Run a Connect call, cancelled as soon as its client goes. connectrpc notices a client
    gone only when a stream's next message is due, so a quiet watch would keep its process
    in the box until the next keepalive (50 s); cancelled, its `finally` ends it at once."""
    gone = False

    async def watched() -> Message:
        nonlocal gone
        message = await receive()
        if message["type"] == "http.disconnect" and not gone:
            gone = True
            call.cancel()
        return message

    call = asyncio.ensure_future(app(scope, watched, send))
    try:
        await call
    except asyncio.CancelledError:
        if not gone:
            raise
    except ConnectError as exc:
        # connectrpc turns the cancel into this, to nobody: the client has gone.
        if not (gone and exc.code == Code.CANCELED):
            raise


def _methods(cls: type) -> frozenset[str]:
    names = [n for n in vars(cls) if not n.startswith("_")]
    return frozenset("".join(p.capitalize() for p in n.split("_")) for n in names)


async def _unimplemented(scope: Scope, send: Send, call: str) -> None:
    body = json.dumps(
        {
            "code": Code.UNIMPLEMENTED.value,
            "message": f"Paddock's envd does not support {call} (unsupported)",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 501,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
