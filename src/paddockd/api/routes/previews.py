"""/v1/boxes/{ref}/previews and /v1/previews: preview URLs for web servers in boxes. The
traffic itself goes through api/preview_proxy.py, not these routes."""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter, Response

from paddock.wire.models import Preview, PreviewCreate, PreviewList

from ...services.previews import Listed
from ..deps import Caller, Svc

router = APIRouter(tags=["previews"])
# Caddy asks before it gets a certificate for PORT-BOX.HOST (on-demand TLS): only names of
# previews that exist get one, so no one can make Caddy request certificates at will.
public = APIRouter(tags=["previews"])


def _out(listed: Listed) -> Preview:
    p = listed.preview
    return Preview(
        id=p.id,
        box=listed.box.name,
        box_id=p.box_id,
        port=p.port,
        public=p.public,
        url=listed.url,
        created_at=datetime.fromtimestamp(p.created_at, timezone.utc),
        expires_at=datetime.fromtimestamp(p.expires_at, timezone.utc) if p.expires_at else None,
    )


@router.post(
    "/boxes/{ref}/previews",
    status_code=201,
    response_model=Preview,
    summary="A URL for the web server on a port of the box (again: a new URL, the old dies)",
)
async def create_preview(ref: str, body: PreviewCreate, svc: Svc, caller: Caller) -> Preview:
    made = await svc.previews.create(ref, body.port, body.public, body.ttl, caller)
    return _out(made)


@router.get("/boxes/{ref}/previews", response_model=PreviewList, summary="The box's previews")
async def list_box_previews(ref: str, svc: Svc, caller: Caller) -> PreviewList:
    return PreviewList(previews=[_out(p) for p in await svc.previews.listed(caller, ref)])


@router.get("/previews", response_model=PreviewList, summary="Your previews (the owner: all)")
async def list_previews(svc: Svc, caller: Caller) -> PreviewList:
    return PreviewList(previews=[_out(p) for p in await svc.previews.listed(caller)])


@router.delete("/previews/{preview_id}", status_code=204, summary="End a preview: its URL dies")
async def delete_preview(preview_id: str, svc: Svc, caller: Caller) -> None:
    await svc.previews.delete(preview_id, caller)


@public.get("/previews/allowed", include_in_schema=False)
async def preview_allowed(domain: str, svc: Svc) -> Response:
    return Response(status_code=200 if await svc.previews.has_domain(domain) else 404)
