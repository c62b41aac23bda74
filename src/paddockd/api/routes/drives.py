"""/v1/drives: named drives that outlive boxes, each user's own (the owner sees all)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import Drive, DriveCreate, DriveList

from ...domain.accounts import User
from ...services.drives import DriveUsage
from ..deps import Caller, Svc

router = APIRouter(prefix="/drives", tags=["drives"])


def present(d: DriveUsage, caller: User, owners: dict[str | None, str]) -> Drive:
    return Drive(
        name=d.name,
        size_bytes=d.size,
        boxes=d.boxes,
        owner=owners.get(d.holder, "(removed user)"),
        owner_id=d.holder,
        mine=d.holder == caller.holder,
        capacity_mb=d.capacity_mb,
    )


@router.get(
    "",
    response_model=DriveList,
    summary="Your drives (the owner: everyone's), their size and users",
)
async def list_drives(svc: Svc, caller: Caller) -> DriveList:
    owners = await svc.accounts.owners()
    return DriveList(drives=[present(d, caller, owners) for d in await svc.drives.all(caller)])


@router.post("", status_code=201, response_model=Drive, summary="Create an empty drive of yours")
async def create_drive(body: DriveCreate, svc: Svc, caller: Caller) -> Drive:
    made = await svc.drives.create(body.name, caller, body.capacity_mb)
    return present(made, caller, await svc.accounts.owners())


@router.delete("/{name}", status_code=204, summary="Delete a drive and its data (not while in use)")
async def delete_drive(
    name: str,
    svc: Svc,
    caller: Caller,
    owner: Annotated[
        str | None,
        Query(
            max_length=64,
            description="whose drive (the owner's choice): a username, or a removed "
            "account's owner_id; yours if not given",
        ),
    ] = None,
) -> None:
    await svc.drives.remove(name, caller, owner)
