"""/v1/boxes/{ref}/files: push (tar in), pull (tar out), stat."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from paddock._models import PushResult

from ...domain.errors import InvalidRequest
from ..deps import Caller, Svc

router = APIRouter(prefix="/boxes", tags=["files"])
_OWNER_RE = re.compile(r"^(\d{1,10}):(\d{1,10})$")


@router.put(
    "/{ref}/files",
    response_model=PushResult,
    summary="Extract a tar stream into a folder in the box (created if missing)",
    openapi_extra={
        "requestBody": {
            "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
            "required": True,
        }
    },
)
async def push_files(
    ref: str,
    path: str,
    request: Request,
    svc: Svc,
    caller: Caller,
    owner: str = "1000:1000",
    wake: bool = False,
) -> PushResult:
    match = _OWNER_RE.match(owner)
    if not match:
        raise InvalidRequest(f"owner must be UID:GID, not {owner!r}")
    if wake:
        await svc.boxes.wake(ref, caller)
    dest, size = await svc.boxes.push(
        ref, path, (int(match[1]), int(match[2])), request.stream(), caller
    )
    return PushResult(path=dest, bytes=size)


@router.get(
    "/{ref}/files",
    summary="Stream a file or folder out of the box as a tar archive",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-tar": {}}}},
)
async def pull_files(ref: str, path: str, svc: Svc, caller: Caller) -> StreamingResponse:
    chunks, stat = await svc.boxes.pull(ref, path, caller)
    header = base64.b64encode(json.dumps(stat).encode()).decode()
    return StreamingResponse(
        chunks, media_type="application/x-tar", headers={"X-Paddock-Stat": header}
    )


@router.get("/{ref}/files/stat", summary="Does a path exist in the box, and what is it")
async def stat_path(ref: str, path: str, svc: Svc, caller: Caller) -> dict[str, Any]:
    return await svc.boxes.stat(ref, path, caller)
