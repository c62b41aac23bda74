"""/v1/audit: who did what, newest first (the owner: everyone's; a member: their own)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import AuditEvent, AuditLog

from ...store.audit import AuditQuery
from ..deps import Caller, Svc

router = APIRouter(tags=["audit"])


@router.get("/audit", response_model=AuditLog, summary="The audit log, newest first")
async def audit(
    svc: Svc,
    caller: Caller,
    user: Annotated[str | None, Query(max_length=64, description="one user's (owner)")] = None,
    box: Annotated[str | None, Query(max_length=64, description="calls naming it")] = None,
    since: Annotated[datetime | None, Query(description="from this time on")] = None,
    until: Annotated[datetime | None, Query(description="before this time")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditLog:
    found = await svc.audit.find(
        caller,
        AuditQuery(
            actor=user,
            target=box,
            since=since.timestamp() if since else None,
            until=until.timestamp() if until else None,
            limit=limit,
        ),
    )
    return AuditLog(
        events=[
            AuditEvent(
                at=datetime.fromtimestamp(e.at, timezone.utc),
                actor=e.actor,
                credential=e.credential,
                source=e.source,
                action=e.action,
                target=e.target,
                status=e.status,
                outcome=e.outcome,
            )
            for e in found
        ]
    )
