"""Server-wide facts: engine health and profile, capacity, image presence."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio.to_thread

from paddock.wire.models import Capacity as CapacityModel
from paddock.wire.models import EngineStatus, ServerStatus

from .. import __version__
from ..domain.accounts import User, sees
from ..domain.box import BoxState, Desired
from ..domain.errors import PaddockError
from ..runtime.base import Profile, Runtime
from .boxes import BoxService
from .pool import WarmPool

LIMITS_SECONDS = 60.0  # how long the disks' limits line stands


class SystemService:
    def __init__(
        self,
        boxes: BoxService,
        runtime: Runtime,
        image: str,
        isolation_failures: Callable[[], dict[str, str]] = dict,
        view_problems: Callable[[], dict[str, str]] = dict,
        *,
        lxcfs_dir: str = "",
        data_root: str = "",
        disk_limits: Callable[[], str] | None = None,
        pool: WarmPool | None = None,
        image_pending: Callable[[], Awaitable[bool | None]] | None = None,
    ) -> None:
        self._boxes = boxes
        self._rt = runtime
        self._image = image
        self._isolation_failures = isolation_failures
        self._view_problems = view_problems
        self._lxcfs_dir = lxcfs_dir
        self._data_root = data_root
        self._disk_limits = disk_limits
        self._pool = pool
        self._image_pending = image_pending
        self._profile: Profile | None = None
        self._limits_read: tuple[float, str] | None = None  # (when, what)

    async def refresh_profile(self) -> Profile:
        self._profile = (await self._rt.info()).profile
        return self._profile

    async def profile(self) -> Profile:
        """The engine's runtime profile, asked once and then remembered."""
        if self._profile is None:
            try:
                return await self.refresh_profile()
            except PaddockError:
                return "plain"
        return self._profile

    async def status(self, caller: User | None = None) -> ServerStatus:
        """The server's status; to a member, their own boxes' (counts, problems) beside
        the capacity everyone shares, and nothing named of anyone else's."""
        try:
            info = await self._rt.info()
            self._profile = info.profile
            engine = EngineStatus(
                reachable=True,
                version=info.version,
                profile=info.profile,
                image=self._image,
                image_present=await self._rt.image_exists(self._image),
                image_pending=await self._image_pending() if self._image_pending else None,
            )
        except PaddockError as exc:
            engine = EngineStatus(reachable=False, image=self._image, error=exc.message)
        everyone = await self._boxes.all()
        cap = self._boxes.capacity
        cpus, memory = cap.used(everyone)
        boxes = [b for b in everyone if sees(caller, b.owner_id)]
        names = {b.id: b.name for b in boxes}
        admin = caller is None or caller.is_owner
        free, total = await self._space() if admin else (None, None)
        return ServerStatus(
            version=__version__,
            engine=engine,
            capacity=CapacityModel(
                cpus_total=cap.cpus,
                cpus_used=cpus,
                memory_total_mb=cap.memory_mb,
                memory_used_mb=memory,
                memory_overcommit=cap.overcommit or None,
                memory_reserve_mb=cap.reserve_mb,
                memory_available_mb=cap.available_mb() if admin else None,
            ),
            boxes_running=sum(b.desired == Desired.RUNNING for b in boxes),
            boxes_stopped=sum(b.state == BoxState.STOPPED for b in boxes),
            problems=[
                *(
                    f"box {names[box_id]}: network isolation failed ({why}); "
                    "it is stopped and retried"
                    for box_id, why in self._isolation_failures().items()
                    if box_id in names
                ),
                *(await self._lxcfs_problems(engine) if admin else ()),
                *(
                    f"box {names[box_id]}: {why}"
                    for box_id, why in self._view_problems().items()
                    if box_id in names
                ),
                *(
                    f"box {b.name}: in error ({b.message or 'no reason recorded'}); "
                    "`paddock resume`, `paddock restore` or `paddock rm` it"
                    for b in boxes
                    if b.state == BoxState.ERROR and b.id not in self._isolation_failures()
                ),
            ],
            data_root=(self._data_root or None) if admin else None,
            data_root_free_bytes=free,
            data_root_total_bytes=total,
            disk_limits=await self._limits(),
            pool=self._pool.status() if self._pool and admin else None,
            snapshots=await self._snapshot_method() if engine.reachable else None,
        )

    async def _limits(self) -> str | None:
        """How boxes' disks are limited: read from the host's mount table, which holds
        two mounts a box, so at most once a minute."""
        if self._disk_limits is None:
            return None
        now = time.monotonic()
        if self._limits_read is None or now - self._limits_read[0] > LIMITS_SECONDS:
            self._limits_read = (now, await anyio.to_thread.run_sync(self._disk_limits))
        return self._limits_read[1]

    async def _snapshot_method(self) -> Literal["copy", "commit"]:
        try:
            return "copy" if await self._rt.copies_disks() else "commit"
        except PaddockError:
            return "commit"

    async def _space(self) -> tuple[int | None, int | None]:
        """Free and total bytes of the data root's filesystem (free as a non-root process
        would see it is beside the point: the engine writes as root)."""
        if not self._data_root:
            return None, None
        try:
            st = await anyio.to_thread.run_sync(os.statvfs, self._data_root)
        except OSError:
            return None, None
        return st.f_bfree * st.f_frsize, st.f_blocks * st.f_frsize

    async def _lxcfs_problems(self, engine: EngineStatus) -> list[str]:
        if not self._lxcfs_dir or not engine.reachable or engine.profile == "sysbox":
            return []
        if await self._rt.views_available():
            return []
        return [
            f"LXCFS is not answering at {self._lxcfs_dir}: new boxes see the host's CPUs, "
            "memory and uptime (install Debian's lxcfs; paddockd or lxcfs.service starts it)"
        ]
