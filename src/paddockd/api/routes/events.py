"""/v1/events: the caller's boxes as they change, as server-sent events (the dashboard's
live list; any client may follow it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TypeVar

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter

from paddock.wire.models import Box as BoxModel
from paddock.wire.models import BoxList

from ...domain.webhooks import Event
from ..deps import Caller, Svc
from .boxes import present

router = APIRouter(tags=["boxes"])
_BOX = TypeAdapter(BoxModel)
_LIST = TypeAdapter(BoxList)
# A comment line this often keeps proxies (and the browser) from calling the stream dead.
HEARTBEAT = 20.0
# The stream ends after this long; a browser's EventSource reconnects by itself, and so
# is authenticated again (a session that ended, a removed member, get no more news).
LIFETIME = 900.0

T = TypeVar("T")


def _event(kind: str, data: bytes | str) -> bytes:
    text = data.decode() if isinstance(data, bytes) else data
    # JSON has no raw newline in it, so the data is one `data:` line.
    return f"event: {kind}\ndata: {text}\n\n".encode()


async def _ticking(items: AsyncIterator[T], every: float, until: float) -> AsyncIterator[T | None]:
    """`items`, with a None whenever nothing came for `every` seconds, until `until`
    (loop time). The pending item is waited for, never cancelled mid-way."""
    loop = asyncio.get_running_loop()
    pending: asyncio.Task[T] | None = None
    try:
        while (left := until - loop.time()) > 0:
            if pending is None:
                pending = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait({pending}, timeout=min(every, left))
            if not done:
                yield None
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield item
    finally:
        if pending is not None:
            # Cancelling the pending step closes the stream; waiting for it lets it finish
            # (an async generator cannot be closed while it runs).
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        await items.aclose()  # type: ignore[attr-defined]


# One parsed event, as OpenAPI 3.1 describes a `text/event-stream` item: its data is JSON
# text (a `BoxList`, a `Box` or `{"id": ...}` by `event`).
_EVENT_SCHEMA = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["boxes", "box", "box-removed", "box-event"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


@router.get(
    "/events",
    summary="Your boxes as they change: server-sent events",
    description=(
        "`text/event-stream`. First a `boxes` event (a `BoxList`: every box you see), then "
        "a `box` event (a `Box`) whenever one is created or changes, and `box-removed` "
        '(`{"id": ...}`) when one you were shown is gone. Comment lines keep the stream '
        "alive; it ends after 15 minutes (reconnect: EventSource does so by itself)."
    ),
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {"schema": _EVENT_SCHEMA}}}},
)
async def events(svc: Svc, caller: Caller) -> StreamingResponse:
    boxes, changes = await svc.events.follow(caller)
    try:
        owners, counts = await svc.accounts.owners(), await svc.boxes.snapshot_counts()
        listed = BoxList(boxes=[await present(svc, b, caller, owners, counts) for b in boxes])
    except BaseException:
        await changes.aclose()  # type: ignore[attr-defined]
        raise
    until = asyncio.get_running_loop().time() + LIFETIME

    async def stream() -> AsyncIterator[bytes]:
        yield _event("boxes", _LIST.dump_json(listed))
        async for change in _ticking(changes, HEARTBEAT, until):
            if change is None:
                yield b": still here\n\n"
            elif isinstance(change, Event):
                yield _event("box-event", change.body())
            elif change.box is None:
                yield _event("box-removed", json.dumps({"id": change.box_id}))
            else:
                yield _event("box", _BOX.dump_json(await present(svc, change.box, caller)))

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
