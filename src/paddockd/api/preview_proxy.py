"""The preview proxy: requests for `PORT-BOXID.HOST` or `/preview/BOXID/PORT/...` go to
the web server on that port inside the box; everything else goes on to the API.

It sits in front of the API's middleware: a preview's uploads are the box app's business
(no API body cap), and no API token is asked for. A private preview admits a request that
carries its URL's secret (once, then a cookie scoped to the preview), or a logged-in
session whose user may see the box (the path form, which shares paddockd's host).

Browsers must never let a box's page act as the logged-in user: the host form is a site
of its own (and the session cookie is `__Host-` under HTTPS, so it cannot plant one);
the path form shares paddockd's origin, so its pages are sandboxed (CSP `sandbox`: an
opaque origin, no access to paddockd with the user's cookies). paddockd's own cookies are
taken out of what the box receives, and out of what it may set.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import re
import socket
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

import h11
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from ..domain.errors import InvalidState, NotFound
from ..domain.previews import (
    COOKIE_PREFIX,
    TOKEN_PARAM,
    TRAFFIC_HEADER,
    Preview,
    Target,
    target_of,
)
from ..services.previews import PreviewService, Waking
from .deps import is_secure, services, session_cookie
from .gate import has_body

log = logging.getLogger(__name__)

# Hop-by-hop headers (RFC 9110 §7.6.1) and what the proxy sets itself.
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
    }
)
_FORWARDED = frozenset(
    {
        b"x-forwarded-for",
        b"x-forwarded-proto",
        b"x-forwarded-host",
        b"x-forwarded-prefix",
        # A private sandbox's traffic token opens its ports; the box's app never sees it.
        TRAFFIC_HEADER.encode(),
    }
)
# Path-form pages share paddockd's origin: an opaque origin keeps them from it.
_SANDBOX = (
    b"sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads "
    b"allow-popups-to-escape-sandbox"
)
_CHUNK = 256 * 1024


def _ours(name: str) -> bool:
    """paddockd's cookies: the box's server never gets them, nor sets them."""
    bare = name.removeprefix("__Host-")
    return bare.startswith("paddock_") or name.startswith("__Host-")


def _strip_cookie_header(value: bytes) -> bytes:
    kept = []
    for part in value.decode("latin-1").split(";"):
        name = part.split("=", 1)[0].strip()
        if name and not _ours(name):
            kept.append(part.strip())
    return "; ".join(kept).encode("latin-1")


def _sets_our_cookie(value: bytes) -> bool:
    """A Set-Cookie the box may not send: one of paddockd's names, or no name at all (a
    nameless cookie is sent back as bare `value`, which a server may read as any name)."""
    pair = value.decode("latin-1").split(";", 1)[0]
    name, eq, _ = pair.partition("=")
    return not eq or not name.strip() or _ours(name.strip())


# Credentials of paddockd's that a client may send along (an API token as a Bearer, E2B's
# key headers): a box's server never gets them. Other Authorization (an app's own Basic
# or Bearer) passes.
_CREDENTIALS = frozenset({b"authorization", b"x-api-key", b"x-access-token"})
_TOKEN = re.compile(rb"(^|[\s:])(e2b_)?pdk_")
# What a box's answer may not carry: Clear-Site-Data would log visitors out of paddockd
# (the path form shares its origin) or wipe what other previews keep.
_BOX_MAY_NOT_SET = frozenset({b"clear-site-data"})


def _page(status: int, title: str, text: str, extra: Iterable[tuple[bytes, bytes]] = ()) -> Any:
    body = (
        "<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width'>"
        f"<title>{html.escape(title)}</title><body style='font-family:sans-serif;margin:3em'>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *extra,
    ]
    return status, headers, body


async def _respond(send: Send, answer: Any, scope: Scope | None = None) -> None:
    """Send one of the proxy's own answers; to a request whose body is still on its way
    (`scope`'s), with the connection closed after it (see api/gate.py's `refusal`)."""
    status, headers, body = answer
    if scope is not None and has_body(scope):
        headers = [*headers, (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class PreviewProxy:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        svc: PreviewService = services(conn).previews
        target = target_of(conn.headers.get("host", ""), scope["path"], svc.routed_host())
        if target is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self._websocket(svc, conn, target, receive, send)
        else:
            await self._http(svc, conn, target, receive, send)

    # -- who may ---------------------------------------------------------------------------
    async def _admit(
        self, svc: PreviewService, conn: HTTPConnection, target: Target
    ) -> tuple[Preview | None, Any]:
        """(the preview, None) when the request may go on, else (preview or None, the
        answer to give instead)."""
        preview = await svc.find(target)
        if preview is None:
            return None, _page(404, "No such preview", "This preview URL does not exist.")
        given = conn.query_params.get(TOKEN_PARAM, "")
        if given and svc.secret_ok(preview, given):
            if conn.scope["type"] == "http" and conn.scope["method"] in ("GET", "HEAD"):
                return preview, self._keep_secret(conn, target, preview, given)
            return preview, None
        if preview.public or svc.traffic_ok(preview, conn.headers.get(TRAFFIC_HEADER, "")):
            return preview, None
        cookie = conn.cookies.get(COOKIE_PREFIX + preview.id, "")
        if cookie and svc.secret_ok(preview, cookie):
            return preview, None
        if target.prefix and session_cookie(conn):
            session = await services(conn).accounts.session(session_cookie(conn))
            if session is not None and await svc.owner_may(preview, session.user):
                return preview, None
        return preview, _page(
            401,
            "This preview is private",
            "Open it with the URL `paddock host ls` shows, or log in as the box's owner.",
        )

    def _keep_secret(
        self, conn: HTTPConnection, target: Target, preview: Preview, given: str
    ) -> Any:
        """The secret becomes a cookie, and the address loses it (so the box's app never
        sees it, nor does the browser's history keep it)."""
        query = urlencode([(k, v) for k, v in parse_qsl(conn.url.query) if k != TOKEN_PARAM])
        # One leading slash: "//host/x" would send the browser to another site.
        location = target.prefix + "/" + target.path.lstrip("/") + (f"?{query}" if query else "")
        cookie = SimpleCookie()
        name = COOKIE_PREFIX + preview.id
        cookie[name] = given
        cookie[name]["path"] = (target.prefix or "") + "/"
        cookie[name]["httponly"] = True
        cookie[name]["samesite"] = "Lax"
        if is_secure(conn):
            cookie[name]["secure"] = True
        header = cookie.output(header="").strip().encode("latin-1")
        return (
            303,
            [(b"location", location.encode()), (b"set-cookie", header), (b"content-length", b"0")],
            b"",
        )

    # -- HTTP ------------------------------------------------------------------------------
    async def _http(
        self,
        svc: PreviewService,
        conn: HTTPConnection,
        target: Target,
        receive: Receive,
        send: Send,
    ) -> None:
        if target.prefix and conn.scope["path"] == target.prefix:
            # Relative links resolve against the folder: /preview/B/P -> /preview/B/P/
            query = conn.url.query
            location = target.prefix + "/" + (f"?{query}" if query else "")
            answer = (308, [(b"location", location.encode()), (b"content-length", b"0")], b"")
            await _respond(send, answer, conn.scope)
            return
        preview, refusal = await self._admit(svc, conn, target)
        if refusal is not None or preview is None:
            await _respond(send, refusal, conn.scope)
            return
        try:
            sock = await svc.connect(preview, wake=preview.wakes)
        except Waking:
            await _respond(send, _holding_page(), conn.scope)
            return
        except NotFound:  # the box went; its previews go with the next sweep
            page = _page(404, "No such preview", "This preview URL does not exist.")
            await _respond(send, page, conn.scope)
            return
        except (InvalidState, OSError, asyncio.TimeoutError) as exc:
            await _respond(send, _unreachable(preview, exc), conn.scope)
            return
        try:
            await _relay_http(conn, target, sock, receive, send)
        finally:
            sock.close()

    # -- WebSocket -------------------------------------------------------------------------
    async def _websocket(
        self,
        svc: PreviewService,
        conn: HTTPConnection,
        target: Target,
        receive: Receive,
        send: Send,
    ) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        first = await receive()
        if first["type"] != "websocket.connect":
            return
        preview, refusal = await self._admit(svc, conn, target)
        if refusal is not None or preview is None:
            await send({"type": "websocket.close", "code": 4401 if preview else 4404})
            return
        try:
            sock = await svc.connect(preview, wake=preview.wakes)
        except (Waking, NotFound, InvalidState, OSError, asyncio.TimeoutError):
            await send({"type": "websocket.close", "code": 1013})
            return
        host = conn.headers.get("host", "box")
        path = target.path + (f"?{_query_without_secret(conn)}" if conn.url.query else "")
        asked = [p.strip() for p in conn.headers.get("sec-websocket-protocol", "").split(",")]
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in _request_headers(conn, target)
            if k not in (b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-protocol")
            and not k.startswith(b"sec-websocket-")
        ]
        try:
            upstream = await connect(
                f"ws://{host}{path}",
                sock=sock,
                proxy=None,
                subprotocols=[p for p in asked if p] or None,  # type: ignore[misc]
                additional_headers=headers,
                user_agent_header=None,
                compression=None,
                ping_interval=None,
                max_size=None,
                open_timeout=10,
            )
        except (InvalidHandshake, OSError, asyncio.TimeoutError):
            sock.close()
            await send({"type": "websocket.close", "code": 1014})
            return
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        activity = svc.activity_of(preview)

        async def to_box() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    await upstream.close()
                    return
                data = message.get("bytes")
                await upstream.send(data if data is not None else message.get("text", ""))

        async def to_client() -> None:
            try:
                async for data in upstream:
                    key = "bytes" if isinstance(data, bytes) else "text"
                    await send({"type": "websocket.send", key: data})
            except ConnectionClosed:
                pass
            code = upstream.close_code or 1000
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": code})

        with activity:
            tasks = [asyncio.ensure_future(to_box()), asyncio.ensure_future(to_client())]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(BaseException):
                        await task
                await upstream.close()


def _query_without_secret(conn: HTTPConnection) -> str:
    return urlencode([(k, v) for k, v in parse_qsl(conn.url.query) if k != TOKEN_PARAM])


def _request_headers(conn: HTTPConnection, target: Target) -> list[tuple[bytes, bytes]]:
    """What the box's server gets: the client's headers without hop-by-hop ones and
    without paddockd's cookies, the original Host, and X-Forwarded-*."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in conn.scope["headers"]:
        if name in _HOP or name in _FORWARDED:
            continue
        if name == b"cookie":
            value = _strip_cookie_header(value)
            if not value:
                continue
        if name in _CREDENTIALS and _TOKEN.search(value):
            continue
        out.append((name, value))
    host = conn.headers.get("host", "")
    client = conn.client.host if conn.client else ""
    out.insert(0, (b"host", host.encode("latin-1")))
    out += [
        (b"x-forwarded-for", client.encode()),
        (b"x-forwarded-proto", b"https" if is_secure(conn) else b"http"),
        (b"x-forwarded-host", host.encode("latin-1")),
    ]
    if target.prefix:
        out.append((b"x-forwarded-prefix", target.prefix.encode()))
    return out


async def _relay_http(
    conn: HTTPConnection, target: Target, sock: socket.socket, receive: Receive, send: Send
) -> None:
    loop = asyncio.get_running_loop()
    client = h11.Connection(h11.CLIENT)
    headers = _request_headers(conn, target)
    first = await receive()
    body = first.get("body", b"")
    more = first.get("more_body", False)
    if not any(n == b"content-length" for n, _ in headers) and (body or more):
        headers.append((b"transfer-encoding", b"chunked"))
    headers.append((b"connection", b"close"))
    query = _query_without_secret(conn)
    request = h11.Request(
        method=conn.scope["method"],
        target=(target.path + (f"?{query}" if query else "")).encode(),
        headers=headers,
    )
    await loop.sock_sendall(sock, client.send(request))
    while body or more:
        if body:
            await loop.sock_sendall(sock, client.send(h11.Data(data=body)) or b"")
        if not more:
            break
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body, more = message.get("body", b""), message.get("more_body", False)
    await loop.sock_sendall(sock, client.send(h11.EndOfMessage()) or b"")

    started = False
    while True:
        try:
            event = client.next_event()
        except h11.RemoteProtocolError:
            # The box's server broke off or spoke something else than HTTP.
            if not started:
                await _respond(
                    send, _page(502, "Bad answer", "The box's server sent no valid HTTP.")
                )
            else:
                await send({"type": "http.response.body", "body": b""})
            return
        if event is h11.NEED_DATA:
            data = await loop.sock_recv(sock, _CHUNK)
            client.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            out = [
                (n, v)
                for n, v in event.headers
                if n not in _HOP
                and n not in _BOX_MAY_NOT_SET
                and not (n == b"set-cookie" and _sets_our_cookie(v))
            ]
            if target.prefix:
                out.append((b"content-security-policy", _SANDBOX))
            await send({"type": "http.response.start", "status": event.status_code, "headers": out})
            started = True
        elif isinstance(event, h11.Data):
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            if started:
                await send({"type": "http.response.body", "body": b""})
            return


def _holding_page() -> Any:
    return _page(
        503,
        "Starting the box…",
        "The box was stopped and is starting; this page reloads by itself.",
        [(b"refresh", b"2"), (b"retry-after", b"2")],
    )


def _unreachable(preview: Preview, exc: BaseException) -> Any:
    why = "nothing answers" if isinstance(exc, (OSError, asyncio.TimeoutError)) else str(exc)
    return _page(
        502,
        "The box's server does not answer",
        f"{why} on port {preview.port} in the box. Is a server listening there "
        "(on 0.0.0.0 or 127.0.0.1)?",
    )
