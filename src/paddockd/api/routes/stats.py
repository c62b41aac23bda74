"""/v1/stats and /v1/boxes/{ref}/stats: what boxes use now."""

from __future__ import annotations

from fastapi import APIRouter

from paddock.wire.models import BoxStats, BoxStatsList

from ..deps import Caller, Svc

router = APIRouter(tags=["stats"])


@router.get("/stats", response_model=BoxStatsList, summary="Every box's CPU, memory, disk, pids")
async def all_stats(svc: Svc, caller: Caller) -> BoxStatsList:
    return BoxStatsList(boxes=await svc.stats.all(caller))


@router.get(
    "/boxes/{ref}/stats", response_model=BoxStats, summary="A box's CPU, memory, disk, pids"
)
async def box_stats(ref: str, svc: Svc, caller: Caller) -> BoxStats:
    return await svc.stats.one(ref, caller)
