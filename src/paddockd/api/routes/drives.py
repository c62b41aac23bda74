"""/v1/drives: named drives that outlive boxes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from paddock._models import Drive, DriveCreate, DriveList

from ..deps import Svc, owner

# Drives are the owner's for now: they have no owner of their own to tell members' apart.
router = APIRouter(prefix="/drives", tags=["drives"], dependencies=[Depends(owner)])


@router.get("", response_model=DriveList, summary="Drives, their size and the boxes using them")
async def list_drives(svc: Svc) -> DriveList:
    return DriveList(
        drives=[
            Drive(name=d.name, size_bytes=d.size, boxes=d.boxes) for d in await svc.drives.all()
        ]
    )


@router.post("", status_code=201, response_model=Drive, summary="Create an empty drive")
async def create_drive(body: DriveCreate, svc: Svc) -> Drive:
    d = await svc.drives.create(body.name)
    return Drive(name=d.name, size_bytes=d.size, boxes=d.boxes)


@router.delete("/{name}", status_code=204, summary="Delete a drive and its data (not while in use)")
async def delete_drive(name: str, svc: Svc) -> Response:
    await svc.drives.remove(name)
    return Response(status_code=204)
