"""/v1/health (no auth), /v1/status, /v1/types, /v1/log (the owner's)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import BoxType, BoxTypeList, ServerLog, ServerLogLine, ServerStatus

from ... import __version__, logs
from ..deps import Caller, Owner, Svc

public = APIRouter(tags=["system"])
router = APIRouter(tags=["system"])


@public.get("/health", summary="Liveness (no token needed)")
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/status", response_model=ServerStatus, summary="Server, engine and capacity")
async def status(svc: Svc, caller: Caller) -> ServerStatus:
    return await svc.system.status(caller)


@router.get("/log", response_model=ServerLog, summary="paddockd's last log messages (owner)")
async def server_log(_: Owner, lines: Annotated[int, Query(ge=1, le=2000)] = 100) -> ServerLog:
    return ServerLog(
        lines=[
            ServerLogLine(
                at=datetime.fromtimestamp(line.at, timezone.utc),
                level=line.level,
                logger=line.logger,
                message=line.message,
            )
            for line in logs.recent.lines(lines)
        ]
    )


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
        default=svc.settings.current.default_type,
    )
