"""Named drives: engine volumes mounted at /mnt/<name>; they outlive every box."""

from __future__ import annotations

from dataclasses import dataclass

from .. import faults
from ..domain.errors import Conflict, NotFound
from ..domain.snapshot import parse_drive, validate_drive_name
from ..runtime.base import LABEL_DRIVE, LABEL_INSTANCE, Runtime, VolumeInfo
from ..store.boxes import BoxRepository
from .reconciler import drive_volume


@dataclass(frozen=True)
class DriveUsage:
    name: str
    size: int
    boxes: list[str]


class DriveService:
    def __init__(self, repo: BoxRepository, runtime: Runtime, instance: str) -> None:
        self._repo = repo
        self._rt = runtime
        self._labels = {LABEL_INSTANCE: instance}

    async def _find(self, name: str) -> VolumeInfo | None:
        found = await self._rt.volumes({**self._labels, LABEL_DRIVE: name})
        return found[0] if found else None

    async def ensure(self, name: str) -> VolumeInfo:
        """The drive, created empty (owned by the box user) if it does not exist yet."""
        validate_drive_name(name)
        return await self._find(name) or await self._rt.create_volume(
            drive_volume(name), {**self._labels, LABEL_DRIVE: name}
        )

    async def create(self, name: str) -> DriveUsage:
        validate_drive_name(name)
        if await self._find(name):
            raise Conflict(f"a drive named {name!r} already exists")
        await self.ensure(name)
        faults.point("drive.created")
        return DriveUsage(name, 0, [])

    async def users(self, name: str) -> list[str]:
        return [
            b.name for b in await self._repo.all() if name in (parse_drive(d)[0] for d in b.drives)
        ]

    async def all(self) -> list[DriveUsage]:
        result = []
        for volume in await self._rt.volumes(self._labels):
            name = volume.labels.get(LABEL_DRIVE)
            if name:
                size = await self._rt.volume_usage(volume)
                result.append(DriveUsage(name, size, await self.users(name)))
        return sorted(result, key=lambda d: d.name)

    async def remove(self, name: str) -> None:
        validate_drive_name(name)
        volume = await self._find(name)
        if volume is None:
            raise NotFound(f"no drive named {name!r} (see `paddock drive ls`)")
        users = await self.users(name)
        if users:
            raise Conflict(
                f"drive {name} is used by box(es) {', '.join(users)}; remove them first",
                details={"boxes": users},
            )
        await self._rt.remove_volume(volume.name)
        faults.point("drive.removed")
