"""/v1/boxes/{ref}/terminal/ws: a login shell with a TTY that survives a dropped
connection (services/terminals.py); the dashboard's terminal tab."""

from __future__ import annotations

import contextlib
import json

import anyio
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from paddock.wire import frames as _frames

from ...domain.errors import InvalidRequest, PaddockError
from ...services.terminals import Attachment
from ..deps import authenticate, services
from ..errors import client_may_leave, error_body

ws_router = APIRouter(prefix="/boxes", tags=["exec"])


def _size(first: dict[str, object]) -> tuple[int, int] | None:
    cols, rows = first.get("cols"), first.get("rows")
    if isinstance(cols, int) and isinstance(rows, int) and 0 < cols < 1000 and 0 < rows < 1000:
        return cols, rows
    return None


@ws_router.websocket("/{ref}/terminal/ws")
@client_may_leave
async def terminal(ws: WebSocket, ref: str) -> None:
    """First message (JSON): {"key": the browser's name for this terminal, "cols", "rows"}.
    The same key attaches again to the shell (its recent output replayed first) while it
    runs. Then as the exec WebSocket: binary messages are keystrokes, text ones controls
    ({"type": "resize", "cols", "rows"}; {"type": "close"} ends the shell); output comes
    in exec frames, after a text message {"type": "attached", "resumed": bool}."""
    await ws.accept()
    svc = services(ws)
    try:
        caller = await authenticate(ws)
        first = json.loads(await ws.receive_text())
        if not isinstance(first, dict):
            raise InvalidRequest("the first message is a JSON object")
        held = await svc.terminals.attach(ref, str(first.get("key", "")), _size(first), caller)
    except PaddockError as exc:
        await ws.send_bytes(_frames.encode_json(_frames.ERROR, error_body(exc.code, exc.message)))
        await ws.close()
        return
    except (ValueError, WebSocketDisconnect):
        await ws.close(code=1003)
        return
    closed = False
    try:
        await ws.send_text(json.dumps({"type": "attached", "resumed": held.resumed}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump_output, ws, held, tg.cancel_scope)
            closed = await _pump_input(ws, held)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if closed:
                await svc.terminals.close(held)
            else:
                svc.terminals.detach(held)
    with contextlib.suppress(RuntimeError):
        await ws.close()


async def _pump_output(ws: WebSocket, held: Attachment, scope: anyio.CancelScope) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        async for frame in held.output():
            await ws.send_bytes(frame)
    scope.cancel()


async def _pump_input(ws: WebSocket, held: Attachment) -> bool:
    """Keystrokes and controls until the browser goes; True if it closed the terminal."""
    with contextlib.suppress(WebSocketDisconnect, PaddockError, ValueError, KeyError):
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                return False
            if msg.get("bytes") is not None:
                await held.write(msg["bytes"])
                continue
            control = json.loads(msg.get("text") or "{}")
            if control.get("type") == "close":
                return True
            if control.get("type") == "resize" and (size := _size(control)):
                with contextlib.suppress(PaddockError):  # the shell may have just ended
                    await held.resize(*size)
    return False
