"""/v1/boxes/{ref}/exec: run a command, streamed (framed) or buffered; interactive over a
WebSocket with stdin, TTY and resize."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import anyio
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError

from paddock.wire import frames as _frames
from paddock.wire.models import ExecRequest, ExecResult

from ...domain.errors import InvalidRequest, PaddockError
from ...services.boxes import BoxProcess, in_background
from ...services.desktop import detached
from ..deps import Caller, Svc, authenticate, services
from ..errors import client_may_leave, error_body

router = APIRouter(prefix="/boxes", tags=["exec"])
_EXEC_REQUEST = TypeAdapter(ExecRequest)
ws_router = APIRouter(prefix="/boxes", tags=["exec"])


async def _frames_of(proc: BoxProcess) -> AsyncIterator[bytes]:
    ended = False
    try:
        async for kind, data in proc.output():
            yield _frames.encode(kind, data)
        code = await proc.wait()
        ended = True
        yield _frames.encode_json(_frames.EXIT, {"exit_code": code})
    except PaddockError as exc:
        yield _frames.encode_json(_frames.ERROR, error_body(exc.code, exc.message))
    finally:
        if not ended:
            # The client went away (Ctrl-C, a signal, a dropped connection): like a
            # terminal hanging up, the command goes with it. `exec -d` is for background.
            with anyio.CancelScope(shield=True):
                await proc.kill()
        await proc.close()


@router.post(
    "/{ref}/exec",
    summary="Run a command in a box",
    description=(
        f"Streams `{_frames.MEDIA_TYPE}` frames: 1 byte kind (1 stdout, 2 stderr, 3 exit, "
        "4 error), 4 bytes big-endian length, payload. With `wait=true` the command runs "
        "to completion and the answer is an `ExecResult` JSON object."
    ),
    response_model=None,
    responses={200: {"content": {_frames.MEDIA_TYPE: {}, "application/json": {}}}},
)
async def exec_command(
    ref: str, body: ExecRequest, svc: Svc, caller: Caller, wait: bool = False
) -> StreamingResponse | ExecResult:
    cmd, env = body.cmd, body.env
    if body.ssh:
        raise InvalidRequest("an SSH session runs over the exec WebSocket (exec/ws)")
    if body.wake:
        await svc.boxes.wake(ref, caller)
    if body.desktop:
        # On the box's desktop (started if need be); detached: back once it started.
        env = {**await svc.desktop.session_env(ref, caller), **env}
        if body.detach:
            cmd, wait = detached(cmd), True
    elif body.detach:
        # In the background: back at once with `PID LOG` (its pid, the file of its output).
        cmd, wait = in_background(cmd), True
    if wait:
        code, out, err = await svc.boxes.run(ref, cmd, body.user, env, body.workdir, caller)
        return ExecResult(exit_code=code, stdout=out, stderr=err)
    proc = await svc.boxes.exec(ref, cmd, env, body.workdir, body.user, caller=caller)
    return StreamingResponse(_frames_of(proc), media_type=_frames.MEDIA_TYPE)


@ws_router.websocket("/{ref}/exec/ws")
@client_may_leave
async def exec_session(ws: WebSocket, ref: str) -> None:
    """First message: an ExecRequest (JSON). Then binary messages are stdin; text messages
    are controls: {"type": "resize", "cols", "rows"} or {"type": "eof"}."""
    await ws.accept()
    try:
        caller = await authenticate(ws)
        req = _EXEC_REQUEST.validate_json(await ws.receive_text())
        size = (req.cols, req.rows) if req.cols and req.rows else None
        if req.wake:
            await services(ws).boxes.wake(ref, caller)
        cmd, user = req.cmd, req.user
        if req.ssh:  # the box's sshd for this one session, as root (it logs the user in)
            cmd, user = await services(ws).ssh.session(ref, caller), "root"
        proc = await services(ws).boxes.exec(
            ref,
            cmd,
            req.env,
            req.workdir,
            user,
            tty=req.tty and not req.ssh,
            stdin=True,
            size=size,
            caller=caller,
        )
    except PaddockError as exc:
        await ws.send_bytes(_frames.encode_json(_frames.ERROR, error_body(exc.code, exc.message)))
        await ws.close()
        return
    except (ValidationError, ValueError, WebSocketDisconnect):
        await ws.close(code=1003)
        return

    # A client that goes away, or a command that ends, ends the session: each pump handles
    # its own end so nothing escapes the task group (which would wrap it in a group).
    async def pump_output(scope: anyio.CancelScope) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            async for frame in _frames_of(proc):
                await ws.send_bytes(frame)
        scope.cancel()

    async def pump_input() -> None:
        with contextlib.suppress(WebSocketDisconnect, PaddockError, ValueError, KeyError):
            while True:
                msg = await ws.receive()
                if msg["type"] == "websocket.disconnect":
                    return
                if msg.get("bytes") is not None:
                    await proc.write(msg["bytes"])
                elif msg.get("text"):
                    await _control(json.loads(msg["text"]))

    async def _control(control: dict[str, object]) -> None:
        if control.get("type") == "resize":
            # The command may have ended a moment ago; a late resize is harmless.
            with contextlib.suppress(PaddockError):
                await proc.resize(int(str(control["cols"])), int(str(control["rows"])))
        elif control.get("type") == "eof":
            await proc.close_stdin()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_output, tg.cancel_scope)
            await pump_input()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await proc.kill()  # a no-op once the command ended by itself
        await proc.close()
    with contextlib.suppress(RuntimeError):  # the client may have closed it already
        await ws.close()
