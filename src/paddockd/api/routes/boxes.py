"""/v1/boxes: create, list, show, stop, resume, extend, delete, and a box's own log
(network: routes/network.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from paddock.wire.models import Box as BoxModel
from paddock.wire.models import BoxCreate, BoxList, ExtendRequest, NetworkSpec

from ...domain.accounts import User
from ...domain.box import Box
from ...domain.network import policy
from ..deps import Caller, Services, Svc

router = APIRouter(prefix="/boxes", tags=["boxes"])


async def present(
    svc: Services,
    box: Box,
    caller: User,
    owners: dict[str | None, str] | None = None,
    counts: dict[str, int] | None = None,
) -> BoxModel:
    """The box as `caller` sees it; `owners` (usernames by id) and `counts` (snapshots by
    box id) save two lookups per box in a list."""
    names = owners if owners is not None else await svc.accounts.owners()
    snapshots = counts.get(box.id, 0) if counts is not None else await svc.boxes.snapshot_count(box)
    return BoxModel(
        id=box.id,
        name=box.name,
        state=box.state.value,
        desired_state=box.desired.value,
        type=box.type,
        image=box.image,
        created_at=box.created_at,
        started_at=box.started_at,
        expires_at=box.expires_at,
        ttl=box.ttl,
        ttl_action=box.ttl_action.value,
        snapshots=snapshots,
        drives=list(box.drives),
        network=NetworkSpec(mode=box.network.mode, allow=list(box.network.allow)),
        agent=box.agent,
        profile=await svc.system.profile(),
        message=box.message,
        owner=names.get(box.owner_id, "(removed user)"),
        # By name: boxes from before accounts (no owner id) are the owner's too.
        mine=names.get(box.owner_id) == caller.username,
        idle_stop=box.idle_stop,
        keep=box.keep,
    )


@router.post("", status_code=201, response_model=BoxModel, summary="Create and start a box")
async def create_box(body: BoxCreate, svc: Svc, caller: Caller) -> BoxModel:
    mode = body.network or ("allowlist" if body.allow else None)
    box = await svc.boxes.create(
        body.name,
        body.type,
        body.ttl,
        body.ttl_action,
        body.drives,
        network=policy(mode, body.allow) if mode else None,
        agent=body.agent,
        caller=caller,
        idle_stop=body.idle_stop,
        keep=body.keep,
        secrets=body.secrets,
        template=body.template,
    )
    return await present(svc, box, caller)


@router.get("", response_model=BoxList, summary="List boxes")
async def list_boxes(svc: Svc, caller: Caller) -> BoxList:
    owners = await svc.accounts.owners()
    boxes = await svc.boxes.listed(caller)
    counts = await svc.boxes.snapshot_counts()
    return BoxList(boxes=[await present(svc, b, caller, owners, counts) for b in boxes])


@router.get("/{ref}", response_model=BoxModel, summary="Show a box (by name, id or id prefix)")
async def get_box(ref: str, svc: Svc, caller: Caller) -> BoxModel:
    return await present(svc, await svc.boxes.resolve(ref, caller), caller)


@router.post("/{ref}/stop", response_model=BoxModel, summary="Stop a box and snapshot its files")
async def stop_box(ref: str, svc: Svc, caller: Caller) -> BoxModel:
    return await present(svc, await svc.boxes.stop(ref, caller), caller)


@router.post("/{ref}/resume", response_model=BoxModel, summary="Start a stopped box again")
async def resume_box(ref: str, svc: Svc, caller: Caller) -> BoxModel:
    return await present(svc, await svc.boxes.resume(ref, caller), caller)


@router.post("/{ref}/extend", response_model=BoxModel, summary="Set a new TTL, counted from now")
async def extend_box(ref: str, body: ExtendRequest, svc: Svc, caller: Caller) -> BoxModel:
    return await present(svc, await svc.boxes.extend(ref, body.ttl, caller), caller)


@router.get(
    "/{ref}/logs",
    response_class=Response,
    summary="The box's own output: its init and services (its container's log)",
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def box_logs(
    ref: str,
    svc: Svc,
    caller: Caller,
    tail: Annotated[int, Query(ge=0, description="only the last N lines (0: all)")] = 0,
) -> Response:
    return Response(await svc.boxes.logs(ref, tail, caller), media_type="text/plain; charset=utf-8")


@router.delete("/{ref}", status_code=204, summary="Delete a box, its container and snapshots")
async def delete_box(ref: str, svc: Svc, caller: Caller, force: bool = False) -> None:
    await svc.boxes.delete(ref, force, caller)
