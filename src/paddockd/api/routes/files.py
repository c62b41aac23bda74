"""/v1/boxes/{ref}/files: push (tar in), pull (tar out), stat, a folder's listing, and
downloads for a browser."""

from __future__ import annotations

import base64
import json
import re
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from paddock.wire.models import CopyKind, FileList, PushResult

from ...domain.errors import InvalidRequest
from ..deps import Caller, Svc

router = APIRouter(prefix="/boxes", tags=["files"])
_OWNER_RE = re.compile(r"^(\d{1,10}):(\d{1,10})$")
_TAR_BODY = {
    "requestBody": {
        "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
        "required": True,
    }
}


@router.put(
    "/{ref}/files",
    response_model=PushResult,
    summary="Extract a tar stream into a folder in the box (created if missing)",
    openapi_extra=_TAR_BODY,
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
    ids = _owner(owner)
    if wake:
        await svc.boxes.wake(ref, caller)
    dest, size = await svc.boxes.push(ref, path, ids, request.stream(), caller)
    return PushResult(path=dest, bytes=size)


def _owner(owner: str) -> tuple[int, int]:
    match = _OWNER_RE.match(owner)
    if not match:
        raise InvalidRequest(f"owner must be UID:GID, not {owner!r}")
    return int(match[1]), int(match[2])


@router.put(
    "/{ref}/files/copy",
    response_model=PushResult,
    summary="Copy a tar into the box by docker cp's rules: the box decides where it lands",
    openapi_extra=_TAR_BODY,
)
async def copy_files(
    ref: str,
    path: str,
    kind: CopyKind,
    request: Request,
    svc: Svc,
    caller: Caller,
    name: str = "",
    owner: str = "1000:1000",
    wake: bool = False,
) -> PushResult:
    ids = _owner(owner)
    if wake:
        await svc.boxes.wake(ref, caller)
    landed, size = await svc.boxes.copy(ref, path, ids, kind, name, request.stream(), caller)
    return PushResult(path=landed, bytes=size)


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


@router.get(
    "/{ref}/files/list",
    response_model=FileList,
    summary="A folder's entries, by name (read in the box as the box user)",
)
async def list_files(ref: str, path: str, svc: Svc, caller: Caller) -> FileList:
    return await svc.files.list(ref, path, caller)


def _attachment(name: str) -> str:
    """Content-Disposition for a name from the box: quoted for RFC 6266 readers, with a
    plain-ASCII fallback that can carry nothing but the name (no quote, no `;`)."""
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\%;' else "_" for c in name)
    encoded = quote(name.encode("utf-8", "replace"), safe="")
    return f"attachment; filename=\"{fallback or 'download'}\"; filename*=UTF-8''{encoded}"


@router.get(
    "/{ref}/files/download",
    summary="A file as it is, or a folder as a zip or tar, as a download for a browser",
    description=(
        "A folder's archive holds only what stays inside it when unpacked: a link that "
        "leads outside it, a device or a fifo is left out (as `pull` would refuse it). "
        "A link is followed in the box."
    ),
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {
                "application/octet-stream": {},
                "application/zip": {},
                "application/x-tar": {},
            }
        }
    },
)
async def download_files(
    ref: str,
    path: str,
    svc: Svc,
    caller: Caller,
    fmt: Annotated[Literal["zip", "tar"], Query(alias="format")] = "zip",
) -> StreamingResponse:
    got = await svc.files.download(ref, path, fmt, caller)
    headers = {
        "Content-Disposition": _attachment(got.filename),
        # Served from the dashboard's own origin: never rendered, whatever it holds.
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "no-store",
    }
    if got.size is not None:
        headers["Content-Length"] = str(got.size)
    return StreamingResponse(got.chunks, media_type=got.media_type, headers=headers)
