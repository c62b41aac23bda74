"""/v1/boxes/{ref}/export and /v1/imports: a box as one file, and a file as a new box."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from paddock.wire.models import Box as BoxModel

from ...services.box_archive import MEDIA_TYPE
from ..deps import Caller, Svc
from .boxes import present

router = APIRouter(tags=["portable boxes"])


@router.get(
    "/boxes/{ref}/export",
    summary="The box's files (or a snapshot's) and settings as one box file",
    description=(
        "A zstd stream holding a manifest (image, type, network policy, drives by name) "
        "and the box's disk, holes left out, with a SHA-256 at its end; `POST /v1/imports` "
        "makes a box of it, on this server or another. Drives' data is not in it."
    ),
    response_class=StreamingResponse,
    responses={200: {"content": {MEDIA_TYPE: {}}}},
)
async def export_box(
    ref: str, svc: Svc, caller: Caller, snapshot: str | None = None
) -> StreamingResponse:
    export = await svc.portable.export(ref, snapshot, caller)
    disposition = f'attachment; filename="{export.filename}"'
    return StreamingResponse(
        export.chunks, media_type=MEDIA_TYPE, headers={"Content-Disposition": disposition}
    )


@router.post(
    "/imports",
    status_code=201,
    response_model=BoxModel,
    summary="Make a new box of a box file (from `export`), and start it",
    description=(
        "`name`, `type`: the new box's (default: the exported box's). `rebase`: lay the "
        "files over this server's box image when the one they were made over is not here. "
        "The whole file is checked (its checksum, and its disk as a filesystem) before the "
        "box is made: a damaged or cut file is refused (`bad_archive`) and leaves nothing."
    ),
    openapi_extra={
        "requestBody": {
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            "required": True,
        }
    },
)
async def import_box(
    request: Request,
    svc: Svc,
    caller: Caller,
    name: str | None = None,
    type_name: Annotated[str | None, Query(alias="type")] = None,
    rebase: bool = False,
) -> BoxModel:
    box = await svc.portable.import_box(request.stream(), name, type_name, rebase, caller)
    return await present(svc, box, caller)
