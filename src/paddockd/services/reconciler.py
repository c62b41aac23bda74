"""Makes the engine match the store, one box at a time; safe to run any number of times.

The store holds what each box should be (`desired`); `reconcile(box_id)` rereads store
and engine and converges: creates, starts, stops (with a snapshot) or removes. It runs
after every change, at start-up, and periodically, so a crash of paddockd or the engine
in the middle of anything is repaired by the next pass.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import anyio.to_thread

from ..domain.box import Box, BoxState, Desired
from ..domain.errors import PaddockError
from ..netpolicy.base import NetworkPolicy
from ..runtime.base import LABEL_INSTANCE, LABEL_NAME, ContainerInfo, ContainerSpec, Runtime
from ..store.boxes import BoxRepository

log = logging.getLogger("paddockd.reconciler")

SNAPSHOT_REPO = "paddock-snapshots/{box_id}"


class Reconciler:
    def __init__(
        self,
        repo: BoxRepository,
        runtime: Runtime,
        network: NetworkPolicy,
        *,
        instance: str,
        boxes_dir: Path,
        stop_timeout: int,
        now: Callable[[], datetime],
    ) -> None:
        self._repo = repo
        self._rt = runtime
        self._net = network
        self._instance = instance
        self._boxes_dir = boxes_dir
        self._stop_timeout = stop_timeout
        self._now = now
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def run_dir(self, box_id: str) -> Path:
        return self._boxes_dir / box_id / "run"

    async def reconcile(self, box_id: str) -> Box | None:
        """Converge one box. Returns it as it now is (None once deleted). On failure the
        box is marked `error` with the reason, and the error is raised."""
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None:
                return None
            try:
                return await self._converge(box)
            except PaddockError as exc:
                current = await self._repo.get(box_id)
                if current is not None:
                    await self._repo.save(
                        replace(current, state=BoxState.ERROR, message=exc.message)
                    )
                raise

    async def _save(self, box: Box, **changes: object) -> Box:
        box = replace(box, **changes)  # type: ignore[arg-type]
        await self._repo.save(box)
        return box

    async def _container(self, box: Box) -> ContainerInfo | None:
        return await self._rt.inspect(box.container_id) if box.container_id else None

    async def _converge(self, box: Box) -> Box | None:
        info = await self._container(box)
        if box.desired == Desired.DELETED:
            await self._delete(box, info)
            return None
        if box.desired == Desired.RUNNING:
            return await self._run(box, info)
        return await self._stop(box, info)

    async def _run(self, box: Box, info: ContainerInfo | None) -> Box:
        note = box.message if box.state == BoxState.RUNNING else None
        if info is None:
            snapshots = await self._repo.snapshot_images(box.id)
            image = snapshots[0] if snapshots else box.image
            if box.container_id is not None:
                # The container vanished (removed by hand, engine data lost): rebuild the box
                # from its newest snapshot rather than lose it.
                note = f"its container was lost; recreated from {image}"
                log.warning("box %s: %s", box.name, note)
            state = BoxState.STARTING if box.container_id else BoxState.CREATING
            if box.state != state:
                box = await self._save(box, state=state)
            created = await self._rt.create(self._spec(box, image))
            box = await self._save(box, container_id=created)
            info = None  # just created: not running yet
        cid = box.container_id
        assert cid is not None
        if info is None or not info.running:
            if box.state != BoxState.CREATING:
                box = await self._save(box, state=BoxState.STARTING)
            await self._rt.start(cid)
        if box.state != BoxState.RUNNING or box.message != note:
            box = await self._save(box, state=BoxState.RUNNING, message=note)
        return box

    async def _stop(self, box: Box, info: ContainerInfo | None) -> Box:
        if box.state == BoxState.STOPPED and (info is None or not info.running):
            return box
        box = await self._save(box, state=BoxState.STOPPING)
        if info is not None:
            if info.running:
                await self._rt.stop(info.id, self._stop_timeout)
            seq = await self._repo.next_snapshot_seq(box.id)
            repository = SNAPSHOT_REPO.format(box_id=box.id)
            await self._rt.commit(info.id, repository, str(seq))
            await self._repo.add_snapshot(box.id, f"{repository}:{seq}", "stop")
        return await self._save(box, state=BoxState.STOPPED, expires_at=None, message=None)

    async def _delete(self, box: Box, info: ContainerInfo | None) -> None:
        if box.state != BoxState.DELETING:
            box = await self._save(box, state=BoxState.DELETING)
        if info is not None:
            await self._rt.remove(info.id)
        for image in await self._repo.snapshot_images(box.id):
            await self._rt.remove_image(image)
        await anyio.to_thread.run_sync(
            lambda: shutil.rmtree(self._boxes_dir / box.id, ignore_errors=True)
        )
        await self._repo.delete(box.id)

    def _spec(self, box: Box, image: str) -> ContainerSpec:
        return ContainerSpec(
            box_id=box.id,
            hostname=box.name,
            image=image,
            cpus=box.cpus,
            memory_mb=box.memory_mb,
            pids=box.pids,
            run_dir=self.run_dir(box.id),
            labels={LABEL_INSTANCE: self._instance, LABEL_NAME: box.name},
        )

    async def reconcile_all(self) -> None:
        """One full pass: network rules, every box, then containers nobody owns."""
        await self._net.ensure()
        known = set()
        for box in await self._repo.all():
            known.add(box.id)
            try:
                await self.reconcile(box.id)
            except PaddockError as exc:
                log.error("box %s could not be reconciled: %s", box.name, exc.message)
        for info in await self._rt.containers({LABEL_INSTANCE: self._instance}):
            # Reread: a box created after the listing above is not an orphan.
            if info.box_id not in known and await self._repo.get(info.box_id) is None:
                log.warning("removing orphan container %s (box %s)", info.id[:12], info.box_id)
                await self._rt.remove(info.id)
