"""/metrics: Prometheus's text format, for the owner (a scraper sends the owner's metrics
token, `paddock token create NAME --metrics`, which reads this and nothing else:
`authorization: {credentials_file: ...}` in its scrape config; docs/server.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ...domain.errors import Forbidden
from ...services.metrics import CONTENT_TYPE
from ..deps import authenticate, services

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    caller = await authenticate(request, scope="metrics")
    if not caller.is_owner:
        raise Forbidden("the metrics are the server owner's")
    return Response(await services(request).metrics.scrape(), media_type=CONTENT_TYPE)
