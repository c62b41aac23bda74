"""/v1/health (no auth), /v1/status, /v1/types."""

from __future__ import annotations

from fastapi import APIRouter

from paddock.wire.models import BoxType, BoxTypeList, ServerStatus

from ... import __version__
from ..deps import Caller, Svc

public = APIRouter(tags=["system"])
router = APIRouter(tags=["system"])


@public.get("/health", summary="Liveness (no token needed)")
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/status", response_model=ServerStatus, summary="Server, engine and capacity")
async def status(svc: Svc, caller: Caller) -> ServerStatus:
    return await svc.system.status(caller)


@router.get("/types", response_model=BoxTypeList, summary="Box types and their limits")
async def types(svc: Svc) -> BoxTypeList:
    return BoxTypeList(
        types=[
            BoxType(
                name=t.name,
                cpus=t.cpus,
                memory_mb=t.memory_mb,
                pids=t.pids,
                description=t.description,
                disk_mb=t.disk_mb,
            )
            for t in svc.boxes.types.values()
        ],
        default=svc.config.default_type,
    )
