"""/v1/boxes/{ref}/snapshots, /restore, /fork."""

from __future__ import annotations

from fastapi import APIRouter

from paddock.wire.models import Box as BoxModel
from paddock.wire.models import (
    ForkList,
    ForkRequest,
    ForksRequest,
    RestoreRequest,
    SnapshotCreate,
    SnapshotList,
)
from paddock.wire.models import Snapshot as SnapshotModel

from ...domain.snapshot import Snapshot
from ...runtime.base import DiskUsage
from ..deps import Caller, Svc
from .boxes import present

router = APIRouter(prefix="/boxes", tags=["snapshots"])


def _wire(snap: Snapshot, current: bool, usage: DiskUsage | None = None) -> SnapshotModel:
    return SnapshotModel(
        id=snap.seq,
        kind=snap.kind,
        created_at=snap.created_at,
        size_bytes=usage.own + usage.shared if usage else snap.size,
        image=snap.image,
        label=snap.label,
        current=current,
        method="copy" if snap.disk else "commit",
        own_bytes=usage.own if usage else None,
        shared_bytes=usage.shared if usage else None,
    )


@router.get(
    "/{ref}/snapshots", response_model=SnapshotList, summary="A box's snapshots, newest first"
)
async def list_snapshots(ref: str, svc: Svc, caller: Caller) -> SnapshotList:
    box, snaps = await svc.snapshots.list(ref, caller)
    usage = await svc.snapshots.usage(snaps)
    return SnapshotList(
        box=box.name,
        snapshots=[_wire(s, s.holds(box), usage.get(s.disk or "")) for s in snaps],
    )


@router.post(
    "/{ref}/snapshots",
    status_code=201,
    response_model=SnapshotModel,
    summary="Snapshot a box now (a running box pauses only while its layer is written)",
)
async def take_snapshot(ref: str, body: SnapshotCreate, svc: Svc, caller: Caller) -> SnapshotModel:
    snap = await svc.snapshots.take(ref, body.label, caller)
    return _wire(snap, True)


@router.delete("/{ref}/snapshots/{snap}", status_code=204, summary="Delete a snapshot")
async def delete_snapshot(ref: str, snap: str, svc: Svc, caller: Caller) -> None:
    await svc.snapshots.remove(ref, snap, caller)


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


@router.post(
    "/{ref}/forks",
    status_code=201,
    response_model=ForkList,
    summary="Many new boxes from this one's files at once, all or none",
)
async def fork_boxes(ref: str, body: ForksRequest, svc: Svc, caller: Caller) -> ForkList:
    forks = await svc.snapshots.fork_count(
        ref, body.count, body.name_prefix, body.snapshot, caller, body.type
    )
    return ForkList(boxes=[await present(svc, b, caller) for b in forks])
