"""/v1/images/build: build the box image, streaming progress as NDJSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from paddock.wire.models import ImageBuildRequest

from ...domain.errors import PaddockError
from ..deps import Svc, owner
from ..errors import error_body

# The box image is every box's: agents upgraded for everyone, a long build. The owner's.
router = APIRouter(prefix="/images", tags=["images"], dependencies=[Depends(owner)])


@router.post(
    "/build",
    summary="Build the box image (progress as newline-delimited JSON events)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def build_image(body: ImageBuildRequest, svc: Svc) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        try:
            async for event in svc.images.build(
                body.no_cache, body.rebuild_base, body.upgrade_agents
            ):
                yield json.dumps(event).encode() + b"\n"
        except PaddockError as exc:
            yield json.dumps(error_body(exc.code, exc.message)).encode() + b"\n"

    return StreamingResponse(events(), media_type="application/x-ndjson")
