"""The box desktop: links for the browser, the page and its WebSocket bridge to the box's
VNC socket, screenshots, and computer-use input."""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from fastapi import APIRouter, Request, Response, WebSocket
from fastapi.responses import HTMLResponse

from paddock.wire.models import DesktopAction, DesktopLink, DesktopRequest

from ...desktop.viewonly import ViewOnlyFilter
from ...domain.errors import PaddockError
from ...services.desktop import parse_size
from ..deps import Caller, Svc, services
from ..errors import client_may_leave

router = APIRouter(prefix="/boxes", tags=["desktop"])
ws_router = APIRouter(prefix="/boxes", tags=["desktop"])
page_router = APIRouter(tags=["desktop"])
PAGE = Path(__file__).parent.parent.parent / "desktop" / "page.html"


@router.post(
    "/{ref}/desktop",
    response_model=DesktopLink,
    summary="Start the box's desktop if need be and give a browser link to it",
)
async def desktop_link(
    ref: str, body: DesktopRequest, request: Request, svc: Svc, caller: Caller
) -> DesktopLink:
    size = parse_size(body.size) if body.size else None
    box, token, grant = await svc.desktop.link(ref, body.view_only, size, caller)
    url = f"{str(request.base_url).rstrip('/')}/desktop/{box.id}?token={token}"
    return DesktopLink(
        url=url,
        token=token,
        expires_at=datetime.fromtimestamp(grant.expires, timezone.utc),
        view_only=grant.view_only,
    )


@router.get(
    "/{ref}/desktop/screenshot",
    summary="A PNG of the box's desktop (started if need be)",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}},
)
async def screenshot(ref: str, svc: Svc, caller: Caller, size: str | None = None) -> Response:
    png = await svc.desktop.screenshot(ref, parse_size(size) if size else None, caller)
    return Response(png, media_type="image/png")


@router.post("/{ref}/desktop/input", status_code=204, summary="Click, type or press keys")
async def desktop_input(ref: str, body: DesktopAction, svc: Svc, caller: Caller) -> None:
    await svc.desktop.act(
        ref, body.action, body.x, body.y, body.button, body.text, body.keys, caller
    )


@page_router.get("/desktop/{box_id}", response_class=HTMLResponse, include_in_schema=False)
async def desktop_page(box_id: str, request: Request, token: str = "") -> HTMLResponse:
    """The noVNC page; the link's token is the only credential."""
    grant = services(request).desktop.check_link(box_id, token)
    page = PAGE.read_text()
    page = page.replace("{{box}}", html.escape(box_id)).replace(
        "{{view_only}}", "true" if grant.view_only else "false"
    )
    return HTMLResponse(
        page, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    )


@ws_router.websocket("/{ref}/desktop/ws")
@client_may_leave
async def desktop_bridge(ws: WebSocket, ref: str, token: str = "") -> None:
    """Bytes between the browser (noVNC) and the box's VNC socket, both ways; a view-only
    link's input never reaches the box."""
    try:
        sock, grant = await services(ws).desktop.bridge(ref, token)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
    except (PaddockError, OSError):
        await ws.close(code=1008)  # before accept: the handshake is refused (HTTP 403)
        return
    offered = ws.scope.get("subprotocols") or []
    await ws.accept(subprotocol="binary" if "binary" in offered else None)
    view_only = ViewOnlyFilter() if grant.view_only else None

    async def browser_to_box() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes") or (message.get("text") or "").encode()
            if view_only is not None:
                data = view_only.feed(data)
            if data:
                writer.write(data)
                await writer.drain()

    async def box_to_browser() -> None:
        while chunk := await reader.read(1 << 16):
            await ws.send_bytes(chunk)

    async def first_done(tg: TaskGroup, job: Callable[[], Awaitable[None]]) -> None:
        # Either side ending (or failing) ends the bridge.
        with contextlib.suppress(Exception):
            await job()
        tg.cancel_scope.cancel()

    try:
        # A viewer is use: no idle stop while one is connected.
        with services(ws).boxes.activity.busy(grant.box_id):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first_done, tg, browser_to_box)
                tg.start_soon(first_done, tg, box_to_browser)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await ws.close()
