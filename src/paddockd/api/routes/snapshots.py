"""/v1/boxes/{ref}/snapshots, /restore, /fork."""

from __future__ import annotations

from fastapi import APIRouter, Response

from paddock.wire.models import Box as BoxModel
from paddock.wire.models import ForkRequest, RestoreRequest, SnapshotCreate, SnapshotList
from paddock.wire.models import Snapshot as SnapshotModel

from ...domain.snapshot import Snapshot
from ..deps import Caller, Svc
from .boxes import present

router = APIRouter(prefix="/boxes", tags=["snapshots"])


def _wire(snap: Snapshot, current: str | None) -> SnapshotModel:
    return SnapshotModel(
        id=snap.seq,
        kind=snap.kind,
        created_at=snap.created_at,
        size_bytes=snap.size,
        image=snap.image,
        label=snap.label,
        current=snap.image == current,
    )


@router.get(
    "/{ref}/snapshots", response_model=SnapshotList, summary="A box's snapshots, newest first"
)
async def list_snapshots(ref: str, svc: Svc, caller: Caller) -> SnapshotList:
    box, snaps = await svc.snapshots.list(ref, caller)
    return SnapshotList(box=box.name, snapshots=[_wire(s, box.current_snapshot) for s in snaps])


@router.post(
    "/{ref}/snapshots",
    status_code=201,
    response_model=SnapshotModel,
    summary="Snapshot a box now (a running box pauses only while its layer is written)",
)
async def take_snapshot(ref: str, body: SnapshotCreate, svc: Svc, caller: Caller) -> SnapshotModel:
    snap = await svc.snapshots.take(ref, body.label, caller)
    return _wire(snap, snap.image)


@router.delete("/{ref}/snapshots/{snap}", status_code=204, summary="Delete a snapshot")
async def delete_snapshot(ref: str, snap: str, svc: Svc, caller: Caller) -> Response:
    await svc.snapshots.remove(ref, snap, caller)
    return Response(status_code=204)


@router.post("/{ref}/restore", response_model=BoxModel, summary="Rewind a box to a snapshot")
async def restore_box(ref: str, body: RestoreRequest, svc: Svc, caller: Caller) -> BoxModel:
    return await present(svc, await svc.snapshots.restore(ref, body.snapshot, caller), caller)


@router.post(
    "/{ref}/fork",
    status_code=201,
    response_model=BoxModel,
    summary="A new box from this one's files (now, or a snapshot)",
)
async def fork_box(ref: str, body: ForkRequest, svc: Svc, caller: Caller) -> BoxModel:
    fork = await svc.snapshots.fork(ref, body.name, body.snapshot, caller, body.type)
    return await present(svc, fork, caller)
