"""What every HTTP request passes before a route reads its body: the API token, then a cap
on the body's size. Both are plain ASGI middleware, ahead of FastAPI, because FastAPI reads
and parses a request's whole body before it solves the route's dependencies: an auth
dependency came too late, and a 300 MB body without a token was held in memory twice
(bytes, then parsed JSON) before its 401."""

from __future__ import annotations

from collections.abc import Callable, Collection

from starlette.requests import HTTPConnection
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..domain.errors import PaddockError, PayloadTooLarge, Unauthorized
from .deps import CALLER, authenticate
from .errors import error_response


class TokenGate:
    """Answers 401 to an API request (under `prefix`) without a valid API token, before
    anything reads its body. `public` paths pass; so do WebSockets, whose handlers
    authenticate once the connection can carry an error frame, and pages outside the API
    (the desktop page takes a desktop link's token)."""

    def __init__(self, app: ASGIApp, prefix: str, public: Collection[str]) -> None:
        self.app = app
        self.prefix = prefix
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        api = path == self.prefix or path.startswith(self.prefix + "/")
        if scope["type"] == "http" and api and path not in self.public:
            try:
                user = await authenticate(HTTPConnection(scope))
            except Unauthorized as exc:
                await refusal(exc, scope)(scope, receive, send)
                return
            # Routes read it through the `Caller` dependency (deps.py).
            scope.setdefault("state", {})[CALLER] = user
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses a request body over `limit` bytes with 413 `payload_too_large`: at once when
    its Content-Length says so, else as soon as the streamed (chunked) body passes the
    limit. The body is gathered here, up to the limit, and replayed to the app, so the app
    never sees part of a body that is then refused. Requests for `streaming` routes
    (method, path template), which read their body as a stream and never hold it whole,
    pass untouched.

    Starlette has a body limit of its own (`max_body_size`), but it answers in plain text,
    and it replaces whatever answer the app began (a 401 would leave as a bare 413)."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        streaming: Collection[tuple[str, str]] = (),
        answer: Callable[[PaddockError, Scope], ASGIApp] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.streaming = [(method, compile_path(path)[0]) for method, path in streaming]
        self.answer = answer or refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._streams(scope):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # http.disconnect: let the app see it
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    def _streams(self, scope: Scope) -> bool:
        return any(
            scope["method"] == method and regex.match(scope["path"])
            for method, regex in self.streaming
        )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        exc = PayloadTooLarge(
            f"the request body is over this endpoint's limit of {self.limit} bytes",
            details={"limit": self.limit},
        )
        await self.answer(exc, scope)(scope, receive, send)


def refusal(exc: PaddockError, scope: Scope) -> ASGIApp:
    """The error answer to a request refused before its body was read. With a body on its
    way, the connection closes after the answer (`Connection: close`): else the server
    would read and drop the whole body to keep the connection, however large, and a
    client that reuses connections learns from the header not to reuse this one."""
    response = error_response(exc)
    if has_body(scope):
        response.headers["connection"] = "close"
    return response


def has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


def _content_length(scope: Scope) -> int | None:
    # The HTTP parser (h11 or httptools) already refused malformed or conflicting values.
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
