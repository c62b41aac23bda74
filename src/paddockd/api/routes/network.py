"""/v1/boxes/{ref}/network: a box's egress policy, its egress log and a suggested allowlist."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from paddock.wire.models import EgressLog, NetworkSpec, NetworkSuggestion

from ...domain.network import policy
from ...services.egress import line
from ..deps import Caller, Svc

router = APIRouter(prefix="/boxes", tags=["network"])


@router.get("/{ref}/network", response_model=NetworkSpec, summary="A box's egress policy")
async def get_network(ref: str, svc: Svc, caller: Caller) -> NetworkSpec:
    box = await svc.boxes.resolve(ref, caller)
    return NetworkSpec(mode=box.network.mode, allow=list(box.network.allow))


@router.put(
    "/{ref}/network",
    response_model=NetworkSpec,
    summary="Set a box's egress policy (applies at once; a bad one changes nothing)",
)
async def set_network(ref: str, body: NetworkSpec, svc: Svc, caller: Caller) -> NetworkSpec:
    # The box first: to whoever may not see it, it is missing whatever policy they sent.
    ref = (await svc.boxes.resolve(ref, caller)).id
    box = await svc.boxes.set_network(ref, policy(body.mode, body.allow), caller)
    return NetworkSpec(mode=box.network.mode, allow=list(box.network.allow))


@router.get(
    "/{ref}/network/log",
    response_model=EgressLog,
    summary="The box's egress log; with follow=true, newline-delimited JSON events as they happen",
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def egress_log(
    ref: str, svc: Svc, caller: Caller, limit: int = 0, follow: bool = False
) -> EgressLog | StreamingResponse:
    if not follow:
        events = await svc.egress.events(ref, max(limit, 0), caller)
        return EgressLog(events=events)
    events, live = await svc.egress.follow(ref, max(limit, 0), caller)

    async def stream() -> AsyncIterator[bytes]:
        for event in events:
            yield line(event).encode() + b"\n"
        async for event in live:
            yield line(event).encode() + b"\n"

    return StreamingResponse(stream(), media_type="application/x-ndjson")


@router.get(
    "/{ref}/network/suggest",
    response_model=NetworkSuggestion,
    summary="An allowlist covering what the box reached, from its egress log",
)
async def suggest(ref: str, svc: Svc, caller: Caller) -> NetworkSuggestion:
    allow, based_on = await svc.egress.suggest(ref, caller)
    return NetworkSuggestion(allow=allow, based_on=based_on)
