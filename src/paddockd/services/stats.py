"""What boxes use now: CPU, memory, disk and processes, for `paddock stats`."""

from __future__ import annotations

import asyncio

from paddock.wire.models import BoxStats

from ..domain.accounts import User, sees
from ..domain.box import Box, BoxState
from ..runtime.base import LABEL_SIZE, Runtime, Usage, VolumeInfo
from .boxes import BoxService
from .reconciler import docker_volume


class StatsService:
    def __init__(self, boxes: BoxService, runtime: Runtime) -> None:
        self._boxes = boxes
        self._rt = runtime

    async def one(self, ref: str, caller: User | None = None) -> BoxStats:
        return (await self._measure([await self._boxes.resolve(ref, caller)]))[0]

    async def all(self, caller: User | None = None) -> list[BoxStats]:
        return await self._measure([b for b in await self._boxes.all() if sees(caller, b.owner_id)])

    async def _measure(self, boxes: list[Box]) -> list[BoxStats]:
        running = [b for b in boxes if b.state == BoxState.RUNNING and b.container_id]
        usage = await self._rt.usage([b.container_id for b in running if b.container_id])
        measured = {b.id: usage[b.container_id] for b in running if b.container_id in usage}
        volumes = {v.name: v for v in await self._rt.volumes({})} if measured else {}
        # Walking a big /var/lib/docker volume takes a while: all boxes' walks at once.
        sizes = await asyncio.gather(
            *(self._disk(used, volumes.get(docker_volume(i))) for i, used in measured.items())
        )
        disks = dict(zip(measured, sizes, strict=True))
        return [
            self._present(b, measured.get(b.id), disks.get(b.id), volumes.get(docker_volume(b.id)))
            for b in boxes
        ]

    async def _disk(self, used: Usage, volume: VolumeInfo | None) -> int:
        return used.layer_bytes + (await self._rt.volume_usage(volume) if volume else 0)

    @staticmethod
    def _present(
        box: Box, used: Usage | None, disk: int | None, volume: VolumeInfo | None
    ) -> BoxStats:
        stats = BoxStats(id=box.id, name=box.name, state=box.state.value, cpus=box.cpus)
        if used is None:
            return stats
        stats.cpu_percent = used.cpu_percent
        stats.memory_bytes = used.memory_bytes
        stats.memory_limit_bytes = used.memory_limit_bytes
        stats.pids, stats.pids_limit = used.pids, used.pids_limit
        stats.disk_bytes = disk
        # None where the engine enforces no size (paddock status says why); the disk's
        # used figure counts the box's Docker volume, so its size does too.
        quota = used.layer_limit_bytes
        if quota and volume is not None and LABEL_SIZE in volume.labels:
            quota += int(volume.labels[LABEL_SIZE]) << 20
        stats.disk_quota_bytes = quota
        return stats
