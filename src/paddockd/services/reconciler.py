"""Makes the engine match the store, one box at a time; safe to run any number of times.

The store holds what each box should be (`desired`); `reconcile(box_id)` rereads store
and engine and converges: creates, starts, stops (with a snapshot) or removes. It runs
after every change, at start-up, and periodically, so a crash of paddockd or the engine
in the middle of anything is repaired by the next pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from .. import faults
from ..domain.accounts import Holders
from ..domain.box import Box, BoxState, Desired
from ..domain.errors import Conflict, InvalidState, NotFound, PaddockError, SnapshotTooLarge
from ..domain.snapshot import Snapshot, SnapshotKind, drive_mount
from ..netpolicy.base import BoxAddress, NetworkRules
from ..runtime import inbox
from ..runtime.base import (
    LABEL_BOX,
    LABEL_INSTANCE,
    LABEL_NAME,
    LABEL_POOL,
    ContainerInfo,
    ContainerSpec,
    ExecSpec,
    Mount,
    Runtime,
)
from ..store.boxes import BoxRepository

log = logging.getLogger("paddockd.reconciler")

SNAPSHOT_REPO = "paddock-snapshots/{box_id}"


def disk_key(box_id: str, seq: int) -> str:
    """A new saved disk for a box's snapshot `seq` (runtime/base.py `save_disk`). Never
    one a deleted snapshot had: a removal still under way must not take a new copy."""
    return f"{box_id}/{seq}r{secrets.token_hex(4)}"


def _current(snap: Snapshot) -> dict[str, str | None]:
    """The box fields that make `snap` what its container is (re)made from."""
    return {"current_snapshot": snap.image, "current_disk": snap.disk}


def _settled(box: Box, info: ContainerInfo | None) -> bool:
    """Whether `reconcile` would leave the box as it is, judged from a listing of its
    container (None: it has none, or it is gone)."""
    if box.desired == Desired.RUNNING:
        return box.state == BoxState.RUNNING and info is not None and info.running
    if box.desired == Desired.STOPPED:
        return box.state == BoxState.STOPPED and (info is None or not info.running)
    return False


def drive_volume(name: str, holder: str | None = None) -> str:
    """The engine volume of `holder`'s drive `name`. The owner's keep the name drives had
    before accounts; a member's carries their id, after a prefix no drive name of the
    owner's can make."""
    return f"paddock-drive-{name}" if holder is None else f"paddock-user-{holder}-drive-{name}"


VOLUME_SWEEP_SECONDS = 600.0


def docker_volume(box_id: str) -> str:
    return f"paddock-box-{box_id}-docker"


def box_of_volume(name: str) -> str | None:
    """The box whose Docker volume `name` is, if it is one."""
    box_id = name.removeprefix("paddock-box-").removesuffix("-docker")
    return box_id if box_id and docker_volume(box_id) == name and "-" not in box_id else None


class Reconciler:
    def __init__(
        self,
        repo: BoxRepository,
        runtime: Runtime,
        network: NetworkRules,
        *,
        instance: str,
        boxes_dir: Path,
        stop_timeout: int,
        now: Callable[[], datetime],
        holders: Callable[[], Awaitable[Holders]],
        retention: int = 5,
        disk_mbps_per_cpu: int = 0,
    ) -> None:
        self._disk_mbps_per_cpu = disk_mbps_per_cpu
        self._repo = repo
        self._holders = holders
        self._rt = runtime
        self._net = network
        self._instance = instance
        self._boxes_dir = boxes_dir
        self._stop_timeout = stop_timeout
        self._now = now
        self._retention = retention
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._net_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        # Boxes whose isolation the last network sync could not apply (id -> why).
        self.isolation_failures: dict[str, str] = {}
        # Snapshot images being committed and disks being saved now, whose rows are not
        # written yet (the sweeps leave them be).
        self.committing: set[str] = set()
        # Deleted boxes whose container and storage are going in the background.
        self._deleting: dict[str, asyncio.Task[None]] = {}
        # Their containers go one at a time: Docker 20.10's network bookkeeping can lose
        # an endpoint to concurrent removals (moby#42119), and a flood of deletes must
        # not become a flood of engine calls.
        self._removals = asyncio.Semaphore(1)
        # Pool boxes (no row yet) whose volume and container are being made.
        self._making: set[str] = set()
        self._volumes_swept = float("-inf")  # monotonic; see `_sweep_volumes`
        # Containers a restore replaced, being removed in the background.
        self._retiring: set[str] = set()
        # Box id -> its new address's old connections being forgotten (see `_run`).
        self._forgetting: dict[str, asyncio.Future[None]] = {}
        # Running boxes that see the host's /proc rather than their own (id -> why).
        self.view_problems: dict[str, str] = {}
        # What else stands on images and saved disks (templates): (images, disks) to keep.
        self.keeps: list[Callable[[], Awaitable[tuple[set[str], set[str]]]]] = []

    def run_dir(self, box_id: str) -> Path:
        return self._boxes_dir / box_id / "run"

    async def sync_network(self) -> None:
        """Enforce every running box's egress policy, keyed by its current address.

        Serialized, with the state read inside the lock: otherwise a periodic pass that
        read the policies before an API change could write its stale view after it. A box
        whose bridge port could not be locked to it is stopped and marked `error` (its
        traffic is dropped meanwhile); the next pass starts it and tries again."""
        async with self._net_lock:
            await self._sync_all()

    async def sync_box(self, box_id: str) -> None:
        """Enforce one box's policy as it now is (it came, changed or went), the others'
        as they were: a full sync only where the network layer cannot do one box alone."""
        async with self._net_lock:
            box = await self._repo.get(box_id)
            labels = {LABEL_INSTANCE: self._instance, LABEL_BOX: box_id}
            running = [i for i in await self._rt.running(labels) if self._enforced(i, box)]
            info = running[0] if len(running) == 1 else None
            address = None
            if box is not None and info is not None:
                address = BoxAddress(box_id, info.ip, box.network, info.id, info.mac, info.pid)
            failed = None if len(running) > 1 else await self._net.sync_box(box_id, address)
            if failed is None:
                await self._sync_all()
                return
            self.isolation_failures = {
                k: v for k, v in self.isolation_failures.items() if k != box_id
            } | failed
            if box is not None and info is not None and box_id in failed:
                await self._isolation_failed(box, info, failed[box_id])

    def _enforced(self, info: ContainerInfo, box: Box | None) -> bool:
        """Whether the rules hold this container as its box's. A deleted box's container
        may run a moment longer: it reaches nothing; nor does a restore's old container,
        going (its box's rules are the new one's)."""
        return (
            box is not None
            and box.state != BoxState.DELETING
            and info.running
            and bool(info.ip)
            and info.box_id == box.id
            and info.id not in self._retiring
        )

    async def _sync_all(self) -> None:
        boxes = {b.id: b for b in await self._repo.all()}
        running = [
            info
            for info in await self._rt.running({LABEL_INSTANCE: self._instance})
            if self._enforced(info, boxes.get(info.box_id))
        ]
        enforced = [
            BoxAddress(i.box_id, i.ip, boxes[i.box_id].network, i.id, i.mac) for i in running
        ]
        failed = await self._net.sync(enforced)
        self.isolation_failures = failed
        for info in running:
            if info.box_id in failed:
                await self._isolation_failed(boxes[info.box_id], info, failed[info.box_id])

    async def _isolation_failed(self, box: Box, info: ContainerInfo, why: str) -> None:
        lock = self._locks[box.id]
        if lock.locked():
            # The box is being changed right now (stopped, restored, deleted): its port may
            # be going with its container. The next sync looks again.
            return
        async with lock:
            current = await self._repo.get(box.id)
            if current is None or (current.desired, current.state) != (
                Desired.RUNNING,
                BoxState.RUNNING,
            ):
                # A box on its way out or down lost its port with its container: marking it
                # `error` would hold up a delete (an E2B kill during a sync) and make a
                # stopped box's next pass stop it again, with a second snapshot.
                return
            if current.container_id != info.id or info.id in self._retiring:
                # A restore's old container, removed since the listing (its port with it):
                # the box runs on its new one, whose rules the next sync checks.
                return
            now = await self._rt.inspect(info.id)
            if now is None or not now.running:
                return  # gone since the listing: the next pass starts it again
            message = f"stopped: its network isolation could not be applied ({why})"
            log.error("box %s: %s", box.name, message)
            await self._rt.stop(info.id, 0)
            await self._repo.update(current, state=BoxState.ERROR, message=message)

    async def reconcile(self, box_id: str) -> Box | None:
        """Converge one box. Returns it as it now is (None once deleted). On failure the
        box is marked `error` with the reason, and the error is raised."""
        converged = False
        try:
            box = await self._reconcile(box_id)
            converged = True
            return box
        finally:
            forgetting = self._forgetting.pop(box_id, None)
            if converged and box is None:
                # Gone: its rules can go a moment later (a box that takes its address next
                # syncs before it runs).
                self._background(self.sync_box(box_id))
            else:
                # A box that starts gets a new address: its rules follow it at once.
                if forgetting is None:
                    await self.sync_box(box_id)
                else:
                    await asyncio.gather(self.sync_box(box_id), forgetting)

    def _background(self, job: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._logged(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _logged(job: Coroutine[Any, Any, None]) -> None:
        try:
            await job
        except PaddockError as exc:
            log.error("background cleanup: %s", exc.message)
        except Exception:
            log.exception("background cleanup failed")

    async def drain(self) -> None:
        """Wait for background cleanups (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _reconcile(self, box_id: str) -> Box | None:
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None:
                return None
            try:
                return await self._converge(box)
            except PaddockError as exc:
                current = await self._repo.get(box_id)
                if current is not None:
                    await self._repo.update(current, state=BoxState.ERROR, message=exc.message)
                raise

    async def _save(self, box: Box, **changes: object) -> Box:
        return await self._repo.update(box, **changes)

    async def _container(self, box: Box) -> ContainerInfo | None:
        return await self._rt.inspect(box.container_id) if box.container_id else None

    async def _converge(self, box: Box) -> Box | None:
        if box.desired == Desired.DELETED:
            await self._delete(box)
            return None
        info = await self._container(box)
        if box.desired == Desired.RUNNING:
            return await self._run(box, info)
        return await self._stop(box, info)

    async def _run(self, box: Box, info: ContainerInfo | None) -> Box:
        note = box.message if box.state == BoxState.RUNNING else None
        if info is not None and await self._outdated_views(box, info):
            # Binds are fixed when a container is made: a box made while LXCFS was down
            # gets its views (or one made with them, while LXCFS is down, starts at all)
            # only in a new container. Its files are all in its stop snapshot.
            await self._rt.remove(info.id)
            box = await self._save(box, container_id=None)
            info = None
        if info is None:
            image = box.source_image
            if box.container_id is not None:
                # The container vanished (removed by hand, engine data lost): rebuild the box
                # from its last snapshot rather than lose it.
                note = f"its container was lost; recreated from {image}"
                log.warning("box %s: %s", box.name, note)
            state = BoxState.STARTING if box.container_id else BoxState.CREATING
            if box.state != state:
                box = await self._save(box, state=state)
            spec = await self._spec(box, image)
            try:
                created = await self._rt.create(spec)
            except Conflict:
                # Its name is taken: by a container the row never recorded, asked of the
                # engine only now (a listing on every create cost every box 10 ms).
                await self._remove_unrecorded(box)
                created = await self._rt.create(spec)
            faults.point("container.created")
            box = await self._save(box, container_id=created)
            info = None  # just created: not running yet
        cid = box.container_id
        assert cid is not None
        started = None
        if info is None or not info.running:
            if box.state != BoxState.CREATING:
                box = await self._save(box, state=BoxState.STARTING)
            await self._rt.start(cid)
            # The engine gives the address at start; it may have been another box's. Its
            # old connections are forgotten beside the rules' sync that follows this pass
            # (`reconcile`): two host-side jobs, each a process's start.
            started = await self._rt.inspect(cid)
            if started is not None and started.ip:
                self._forgetting[box.id] = asyncio.ensure_future(self._net.forget_flows(started.ip))
            faults.point("container.started")
        running = started or info
        if (
            (started is not None or box.state != BoxState.RUNNING)
            and running is not None
            and running.hostname
            and running.hostname != box.name
        ):
            # A container the warm pool made before the box's name was known: named at
            # its claim (the row says CREATING until then, even across a crash), and
            # again after every start, where the engine names it as it was made.
            await self._rt.set_hostname(cid, box.name)
        # A claimed pooled box booted before it was anyone's: its first boot as a box.
        first = box.state == BoxState.CREATING
        if box.state != BoxState.RUNNING or box.message != note:
            box = await self._save(box, state=BoxState.RUNNING, message=note)
        if (started is not None or first) and box.start_cmd:
            self._background(self._start_command(box, cid))
        return box

    async def _start_command(self, box: Box, cid: str) -> None:
        """The command its template starts at each boot, in the background of the box (its
        output in /tmp/paddock-start.log there)."""
        argv = inbox.detached(["/bin/sh", "-c", box.start_cmd or ""], "/tmp/paddock-start.log")
        spec = ExecSpec(argv, dict(box.env), box.workdir or "/config", box.user or "abc")
        proc = await self._rt.exec(cid, spec)
        try:
            async for _ in proc.output():
                pass  # what it printed before it was on its own: nothing paddockd keeps
            if await proc.wait() != 0:
                log.warning("box %s: its start command could not start", box.name)
        finally:
            await proc.close()

    async def _remove_unrecorded(self, box: Box) -> None:
        """A crash between the engine's create and the row's update left a container the
        row does not name; it holds the box's container name, so no new one could be made.
        It never ran (a start follows the row), so nothing of the user's is in it."""
        labels = {LABEL_INSTANCE: self._instance, LABEL_BOX: box.id}
        for info in await self._rt.containers(labels):
            if info.id != box.container_id and info.id not in self._retiring:
                log.warning(
                    "box %s: removing container %s it never recorded", box.name, info.id[:12]
                )
                await self._rt.remove(info.id)

    async def _outdated_views(self, box: Box, info: ContainerInfo) -> bool:
        if info.running or box.state != BoxState.STOPPED or box.current_snapshot is None:
            return False
        return info.views != await self._rt.views_available()

    async def check_views(self) -> None:
        """Find running boxes that see the host's /proc: made while LXCFS was down, or
        holding views of an LXCFS that has since restarted (their reads fail with ENOTCONN
        until the box restarts; see runtime/lxcfs.py). Nothing here can rebind a running
        box's files, so the admin is told which boxes a stop and resume fixes."""
        problems: dict[str, str] = {}
        if await self._rt.views_available():
            boxes = {b.id for b in await self._repo.all()}
            for info in await self._rt.containers({LABEL_INSTANCE: self._instance}):
                if not info.running or info.box_id not in boxes:
                    continue  # the warm pool's are its own to check
                if not info.views:
                    problems[info.box_id] = (
                        "started while LXCFS was down, it sees the host's CPUs and memory; "
                        "stop and resume it"
                    )
                elif await self._rt.stale_views(info.id):
                    problems[info.box_id] = (
                        "LXCFS restarted under it, so reading its /proc/meminfo, cpuinfo "
                        "and uptime fails; stop and resume it"
                    )
        self.view_problems = problems

    async def _stop(self, box: Box, info: ContainerInfo | None) -> Box:
        if box.state == BoxState.STOPPED and (info is None or not info.running):
            return box
        box = await self._save(box, state=BoxState.STOPPING)
        message = None
        if info is not None:
            if info.running:
                await self._rt.stop(info.id, self._stop_timeout)
            try:
                snap = await self._commit(box, info.id, "stop", None)
            except SnapshotTooLarge as exc:
                # Stopped all the same: its files stay in its container (on its own disk),
                # which a resume starts again; only the snapshot is not taken.
                message = f"stopped without a snapshot: {exc.message}"
            else:
                box = await self._save(box, **_current(snap))
                await self._prune(box)
        return await self._save(box, state=BoxState.STOPPED, expires_at=None, message=message)

    async def _commit(self, box: Box, cid: str, kind: SnapshotKind, label: str | None) -> Snapshot:
        """The box's next snapshot: a copy of its disk where disks copy at the speed of
        metadata (runtime/diskcopy.py), else an engine commit of the container. A failed
        one leaves no row and nothing half-made behind; the error says why (e.g. the disk
        is full)."""
        seq = await self._repo.next_snapshot_seq(box.id)
        if await self._rt.copies_disks():
            copied = await self._copy(box, cid, seq, kind, label)
            if copied is not None:
                return copied
        repository = SNAPSHOT_REPO.format(box_id=box.id)
        image = f"{repository}:{seq}"
        self.committing.add(image)  # the image sweep leaves it be until its row is written
        try:
            try:
                await self._rt.commit(cid, repository, str(seq))
                size = await self._rt.layer_size(image)
            except PaddockError as exc:
                with contextlib.suppress(PaddockError):
                    await self._rt.remove_image(image)
                if isinstance(exc, SnapshotTooLarge):
                    raise
                raise PaddockError(f"could not snapshot box {box.name}: {exc.message}") from exc
            faults.point(f"{'snapshot' if kind == 'live' else kind}.committed")
            snap = Snapshot(box.id, seq, image, kind, self._now(), size, label)
            await self._repo.add_snapshot(snap)
            return snap
        finally:
            self.committing.discard(image)

    async def _copy(
        self, box: Box, cid: str, seq: int, kind: SnapshotKind, label: str | None
    ) -> Snapshot | None:
        """The snapshot as a copy of the container's disk; None if it has none of its own."""
        info = await self._rt.inspect(cid)
        if info is None:
            raise InvalidState(f"box {box.name} has no container to snapshot right now")
        key = disk_key(box.id, seq)
        self.committing.add(key)
        try:
            try:
                if not await self._rt.save_disk(cid, key):
                    return None
            except PaddockError as exc:
                raise PaddockError(f"could not snapshot box {box.name}: {exc.message}") from exc
            try:
                faults.point(f"{'snapshot' if kind == 'live' else kind}.committed")
                usage = (await self._rt.disk_usage([key])).get(key)
                size = usage.own + usage.shared if usage else 0
                # The container's image by id: a rebuilt box image moves its tag, and the
                # copy belongs on the layers it was made over.
                base = info.image_id or info.image
                snap = Snapshot(box.id, seq, base, kind, self._now(), size, label, disk=key)
                await self._repo.add_snapshot(snap)
            except Exception:
                await self._rt.drop_disk(key)
                raise
            return snap
        finally:
            self.committing.discard(key)

    async def remove_snapshot(self, box_id: str, seq: int) -> None:
        """Delete a snapshot, under the box's lock (a restore to it cannot slip between
        the check and the removal). A box standing on a disk copy keeps a copy of its own
        (a reflink: no time, no space); one standing on an engine commit keeps it."""
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            snap = next((s for s in await self._repo.snapshots(box_id) if s.seq == seq), None)
            if box is None or snap is None:
                raise NotFound("the snapshot was deleted meanwhile")
            if snap.disk is None and (snap.holds(box) or snap.image == box.image):
                raise Conflict(
                    f"snapshot {snap.seq} holds box {box.name}'s current files; "
                    "take a newer snapshot or restore another one first"
                )
            if snap.disk is not None and snap.holds(box):
                own = disk_key(box.id, 0)
                self.committing.add(own)
                try:
                    await self._rt.copy_disk(snap.disk, own)
                    await self._save(box, current_disk=own)
                finally:
                    self.committing.discard(own)
            await self._repo.delete_snapshot(box_id, seq)
            await self.forget(snap)

    async def forget(self, snap: Snapshot) -> None:
        """Remove what holds a snapshot's files (its row is the caller's): its disk copy,
        or its image unless a box stands on it."""
        if snap.disk is not None:
            await self._rt.drop_disk(snap.disk)
        elif snap.image not in await self.images_needed():
            await self.release_image(snap.image)

    async def images_needed(self, except_box: str | None = None) -> set[str]:
        """Images a box is (or would be) created from, and those containers run on now:
        after a restore or a fork these can differ, and neither may be removed."""
        needed = await self._repo.images_in_use(except_box=except_box)
        for info in await self._rt.containers({LABEL_INSTANCE: self._instance}):
            if info.box_id != except_box:
                needed.add(info.image)
        for kept in self.keeps:
            needed |= (await kept())[0]
        return needed

    async def release_image(self, image: str) -> None:
        """Remove an image nobody needs; a refusal by the engine is logged, not fatal."""
        try:
            await self._rt.remove_image(image)
        except PaddockError as exc:
            log.warning("kept image %s: %s", image, exc.message)

    async def _prune(self, box: Box) -> None:
        """Keep the newest automatic snapshots (the box's own count, else the server's
        retention); never one that is still needed."""
        automatic = [s for s in await self._repo.snapshots(box.id) if s.automatic]
        needed = await self.images_needed()
        for snap in automatic[box.keep or self._retention :]:
            if snap.disk is not None and snap.disk != box.current_disk:
                await self._repo.delete_snapshot(box.id, snap.seq)
                await self._rt.drop_disk(snap.disk)
            elif snap.disk is None and snap.image not in needed:
                await self.release_image(snap.image)
                await self._repo.delete_snapshot(box.id, snap.seq)

    async def _delete(self, box: Box) -> None:
        """The box goes now for its user: the row frees the name at once (it takes the id)
        and leaves the listing, and the caller is answered. Its container, then its Docker
        volume, snapshot images and folder go in the background (`deletions` waits for
        them). Its addresses are out of the rules from the next sync, so what runs in it
        meanwhile reaches nothing. A failure, or a restart in between, leaves the row
        `deleting`, and the next reconcile pass finishes the job."""
        if box.state != BoxState.DELETING:
            box = await self._save(box, state=BoxState.DELETING, name=box.id)
        if box.id not in self._deleting:
            task = self._background(self._release(box.id))
            self._deleting[box.id] = task
            task.add_done_callback(lambda _: self._deleting.pop(box.id, None))

    async def deletions(self, box_ids: list[str], timeout: float = 30.0) -> bool:
        """Wait (`timeout` at most) until these deleted boxes have lost their containers
        and storage (a drive one of them mounted is free then); whether they have."""
        going = [task for box_id, task in self._deleting.items() if box_id in box_ids]
        if not going:
            return True
        _, pending = await asyncio.wait(going, timeout=timeout)  # never cancels them
        return not pending

    async def _release(self, box_id: str) -> None:
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None or box.state != BoxState.DELETING:
                return
            if box.container_id:
                # No inspect first: removing a container that is already gone is no error.
                async with self._removals:
                    await self._rt.remove(box.container_id)
            await self._release_storage(box)

    async def _release_storage(self, box: Box) -> None:
        await self._remove_files(box.id)
        # A fork may have been made from one of these images: those stay until it goes.
        in_use = await self.images_needed(except_box=box.id)
        # Disk copies are the box's alone (a fork copies, never shares, a file); their
        # images are the bases of other boxes too, and go only by the image sweep.
        await self._rt.drop_disk(f"{box.id}/*")
        mine = [s.image for s in await self._repo.snapshots(box.id) if s.disk is None]
        # A fork's base is another box's snapshot: it stays while that box lists it.
        in_use |= await self._repo.all_snapshot_images() - set(mine)
        if box.image.startswith("paddock-snapshots/"):
            mine.append(box.image)
        for image in mine:
            if image not in in_use:
                await self.release_image(image)
        await self._repo.delete(box.id)

    async def _remove_files(self, box_id: str) -> None:
        """The box's Docker volume and its folder (run folder, egress log)."""
        await self._rt.remove_volume(docker_volume(box_id))
        await self._rt.release_run_folder(self.run_dir(box_id))
        await anyio.to_thread.run_sync(
            lambda: shutil.rmtree(self._boxes_dir / box_id, ignore_errors=True)
        )

    # -- the warm pool's containers: boxes without a row yet ------------------------------
    async def create_pooled(self, box: Box, labels: dict[str, str]) -> ContainerInfo:
        """Make and start a container for `box`, which has no row (services/pool.py). It
        is named by its id until a claim names it, and it has no network until then: the
        bridge guard binds ports only to boxes in the store."""
        self._making.add(box.id)  # its volume comes before its container: not an orphan
        try:
            cid = await self._rt.create(await self._spec(box, box.image, labels))
        finally:
            self._making.discard(box.id)
        try:
            await self._rt.start(cid)
            info = await self._rt.inspect(cid)
            if info is None or not info.running:
                raise PaddockError(f"the pool's container {cid[:12]} stopped as it started")
            if info.ip:
                await self._net.forget_flows(info.ip)
        except PaddockError:
            with contextlib.suppress(PaddockError):
                await self.discard_pooled(box.id)
            raise
        return info

    async def discard_pooled(self, box_id: str) -> None:
        """Remove a pool's container and its storage; never one a claim made a box of."""
        async with self._locks[box_id]:
            if await self._repo.get(box_id) is not None:
                log.error("not discarding box %s from the pool: it was claimed", box_id)
                return
            for info in await self._rt.containers(
                {LABEL_INSTANCE: self._instance, LABEL_BOX: box_id}
            ):
                await self._rt.remove(info.id)
            await self._remove_files(box_id)

    # -- operations the snapshot service asks for, under the box's lock ------------------
    async def snapshot(self, box_id: str, kind: SnapshotKind, label: str | None) -> Snapshot:
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None or box.container_id is None:
                raise InvalidState("the box has no filesystem to snapshot right now")
            if box.state == BoxState.ERROR:
                raise InvalidState(
                    f"box {box.name} is in error: {box.message or 'see paddock ls'}; "
                    "resume or restore it first"
                )
            if box.state not in (BoxState.RUNNING, BoxState.STOPPED):
                raise InvalidState(f"box {box.name} is {box.state.value}; try again in a moment")
            snap = await self._commit(box, box.container_id, kind, label)
            await self._save(box, **_current(snap))
            return snap

    async def save_for_forks(self, box_id: str, key: str | None = None) -> tuple[str, str] | None:
        """A copy of the box's disk now, for forks to copy in turn: (its base image, the
        saved disk), to be dropped with `drop_saved` once they are made; None where boxes'
        disks are not copied (the caller commits instead)."""
        if not await self._rt.copies_disks():
            return None
        key = key or f"forks/{secrets.token_hex(8)}"
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            info = await self._container(box) if box is not None else None
            if box is None or info is None:
                raise InvalidState("the box has no filesystem to fork right now")
            self.committing.add(key)
            try:
                if not await self._rt.save_disk(info.id, key):
                    self.committing.discard(key)
                    return None
            except BaseException:
                self.committing.discard(key)
                raise
        faults.point("fork.copied")
        return info.image_id or info.image, key

    async def save_disk_as(self, box_id: str, key: str) -> tuple[str, str]:
        """A copy of the running box's disk now, kept as `key` (a template's): (its base
        image, `key`). The caller records it before the sweep's next pass (it is kept meanwhile)."""
        saved = await self.save_for_forks(box_id, key)
        if saved is None:
            raise InvalidState(
                "templates need the engine's disks copied by reflink, which this server's "
                "filesystem does not do (paddock status)"
            )
        return saved

    async def save_snapshot_as(self, box_id: str, seq: int | None, key: str) -> tuple[str, str]:
        """A copy of the box's files kept as `key`: of its disk now (a running box), its
        current files (a stopped one), or snapshot `seq`: (its base image, `key`)."""
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None:
                raise NotFound("the box was deleted meanwhile")
            snaps = await self._repo.snapshots(box_id)
            snap = next((x for x in snaps if x.seq == seq), None) if seq is not None else None
            if seq is not None and snap is None:
                raise NotFound(f"box {box.name} has no snapshot {seq}")
            running = box.container_id is not None and box.state == BoxState.RUNNING
            source = snap.disk if snap else (None if running else box.current_disk)
            image = snap.image if snap else box.current_snapshot
        if source is None and snap is None and running:
            return await self.save_disk_as(box_id, key)
        if source is None or image is None:
            raise InvalidState(
                f"box {box.name} has no copy of its files to make a template of: resume it, "
                "or name one of its snapshots"
            )
        self.committing.add(key)
        try:
            await self._rt.copy_disk(source, key)
        except BaseException:
            self.committing.discard(key)
            raise
        return image, key

    async def snapshots_of(self, box_id: str) -> list[Snapshot]:
        return await self._repo.snapshots(box_id)

    def recorded(self, key: str) -> None:
        """A saved disk is named by its row now: the sweep may judge it."""
        self.committing.discard(key)

    async def drop_saved(self, key: str) -> None:
        try:
            await self._rt.drop_disk(key)
        finally:
            self.committing.discard(key)

    async def adopt(self, box: Box, image: str, disk: str) -> Box:
        """Give a new box (a fork) a copy of the saved disk `disk` as its first snapshot,
        which its container is then made from."""
        async with self._locks[box.id]:
            key = disk_key(box.id, 1)
            self.committing.add(key)
            try:
                await self._rt.copy_disk(disk, key)
                snap = Snapshot(box.id, 1, image, "fork", self._now(), 0, None, disk=key)
                # One write: a fork whose row named no disk would come up empty.
                await self._repo.add_snapshot(snap, current=True)
            finally:
                self.committing.discard(key)
            return replace(box, current_snapshot=snap.image, current_disk=snap.disk)

    async def rebase(self, box_id: str, snap: Snapshot) -> Box | None:
        """Throw the box's container away and recreate it from `snap` (restore)."""
        async with self._locks[box_id]:
            box = await self._repo.get(box_id)
            if box is None:
                return None
            if box.state not in (BoxState.RUNNING, BoxState.STOPPED, BoxState.ERROR):
                raise InvalidState(
                    f"box {box.name} is {box.state.value}; restore it once that is done"
                )
            running = box.desired == Desired.RUNNING
            old = box.container_id
            # The row first: from its write on, a crash finishes the restore (the old
            # container, recorded nowhere, goes before the new one is made). The other
            # order left a box rebuilt from its last snapshot, neither before nor after.
            box = await self._save(
                box,
                container_id=None,
                **_current(snap),
                message=None,
                state=BoxState.STARTING if running else BoxState.STOPPED,
            )
            faults.point("restore.saved")
            if old and not await self._load_in_place(box, old, snap):
                # The old container goes beside the new one's making: a running box's
                # takes the engine as long to kill as the new one takes to start.
                await self._rt.retire(old)
                self._retiring.add(old)
                self._background(self._retired(old))
        return await self.reconcile(box_id)

    async def _load_in_place(self, box: Box, cid: str, snap: Snapshot) -> bool:
        """Restore into the box's own container where the snapshot is a copy of a disk
        over the image that container runs: stopped, its disk swapped for a copy of the
        snapshot's, recorded again. No container is made or removed, which the engine
        took longer over than the copy. False where it cannot (the caller makes a new
        container)."""
        if snap.disk is None:
            return False
        try:
            info = await self._rt.inspect(cid)
            # (A container made while LXCFS was down gets its views only in a new one.)
            if info is None or info.image_id != snap.image:
                return False
            if info.views != await self._rt.views_available():
                return False
            # The copy is put in while the engine kills the box's processes (a restore
            # throws them away): the kill, not the copy, is what a restore waits for.
            kill = self._rt.stop(cid, 0) if info.running else asyncio.sleep(0)
            done = await asyncio.gather(
                self._rt.load_disk(cid, snap.disk), kill, return_exceptions=True
            )
            for outcome in done:
                if isinstance(outcome, BaseException):
                    raise outcome
            if done[0] is not True:
                return False
        except PaddockError as exc:
            log.warning(
                "box %s: restoring in place failed (%s); making a new container",
                box.name,
                exc.message,
            )
            return False
        faults.point("restore.loaded")
        await self._save(box, container_id=cid)
        return True

    async def _retired(self, cid: str) -> None:
        try:
            await self._rt.remove(cid)
        finally:
            self._retiring.discard(cid)

    async def _spec(
        self, box: Box, image: str, pool_labels: dict[str, str] | None = None
    ) -> ContainerSpec:
        # The box's Docker keeps its images and containers on a volume of its own: kept
        # across stop/resume, never in a snapshot, removed with the box.
        mounts = [Mount(docker_volume(box.id), "/var/lib/docker", size_mb=box.disk_mb)]
        holder = (await self._holders()).of(box.owner_id) if box.drives else None
        for spec in box.drives:
            name, read_only, path = drive_mount(spec)
            mounts.append(Mount(drive_volume(name, holder), path, read_only))
        return ContainerSpec(
            box_id=box.id,
            hostname=box.name,
            image=image,
            cpus=box.cpus,
            memory_mb=box.memory_mb,
            pids=box.pids,
            disk_mb=box.disk_mb,
            disk_mbps=int(self._disk_mbps_per_cpu * box.cpus),
            run_dir=self.run_dir(box.id),
            disk=box.current_disk if image == box.source_image else None,
            labels={
                LABEL_INSTANCE: self._instance,
                # A pooled container's name is not known yet: it has the pool's labels. A
                # box's blanks the pool's, which a snapshot of a claimed box would pass on.
                **(pool_labels or {LABEL_NAME: box.name, LABEL_POOL: ""}),
            },
            mounts=tuple(mounts),
        )

    async def reconcile_all(self) -> None:
        """One full pass, level-based: the engine's containers are listed, and only the
        boxes whose container is not what their row says are converged, so a box at rest
        costs the pass no call of its own to the engine. Then one network sync, the /proc
        views' check and containers nobody owns."""
        listed = await self._rt.containers({LABEL_INSTANCE: self._instance})
        by_id = {info.id: info for info in listed}
        known = set()
        converged = False
        for box in await self._repo.all():
            known.add(box.id)
            if _settled(box, by_id.get(box.container_id or "")) or box.id in self._deleting:
                continue  # a deletion under way holds the box's lock until its removal
            converged = True
            try:
                await self.reconcile(box.id)
            except PaddockError as exc:
                log.error("box %s could not be reconciled: %s", box.name, exc.message)
        # Every box at once, whatever the passes of single boxes did: what no box's own
        # sync sees (a flushed ruleset, the host's networks, a port gone) heals here.
        await self.sync_network()
        try:
            await self.check_views()
        except PaddockError as exc:
            log.error("checking boxes' /proc views: %s", exc.message)
        if converged:
            # Containers were made and removed since the listing.
            listed = await self._rt.containers({LABEL_INSTANCE: self._instance})
        for info in listed:
            if info.labels.get(LABEL_POOL) and info.box_id not in known:
                continue  # the warm pool's (it adopts or removes them), or just claimed
            if info.box_id in known and info.id not in self._retiring:
                owner = await self._repo.get(info.box_id)
                if owner is not None and owner.container_id not in (None, info.id):
                    # A restore's old container whose removal a crash or a failure cut
                    # short: aside first, so its removal leaves the box's run folder be.
                    log.warning("removing container %s, replaced by a restore", info.id[:12])
                    await self._rt.retire(info.id)
                    await self._rt.remove(info.id)
                continue
            # Reread: a box created after the listing above is not an orphan.
            if info.box_id not in known and await self._repo.get(info.box_id) is None:
                log.warning("removing orphan container %s (box %s)", info.id[:12], info.box_id)
                await self._rt.remove(info.id)
                await self._remove_files(info.box_id)  # its Docker volume goes with it
        await self._sweep_volumes()
        try:
            await self._rt.sweep()
            await self._sweep_disks()
        except PaddockError as exc:
            log.error("sweeping what removed containers left: %s", exc.message)

    async def _sweep_volumes(self) -> None:
        """Drop box volumes of this instance's whose box has neither a row nor a container:
        a crash after a pooled make recorded the volume, before its container was made.
        At the first pass (after a restart, when such are found) and every
        VOLUME_SWEEP_SECONDS: it lists every volume and container. Read in this order: a
        make not under way by the time the containers are listed had made its container
        by then."""
        now = time.monotonic()
        if now - self._volumes_swept < VOLUME_SWEEP_SECONDS:
            return
        self._volumes_swept = now
        volumes = await self._rt.volumes({LABEL_INSTANCE: self._instance})
        making = set(self._making)
        held = {c.box_id for c in await self._rt.containers({LABEL_INSTANCE: self._instance})}
        for volume in volumes:
            box_id = box_of_volume(volume.name)
            if box_id is None or box_id in making or box_id in held:
                continue
            if await self._repo.get(box_id) is None:
                log.warning("removing volume %s: no box has it", volume.name)
                await self._remove_files(box_id)

    async def _sweep_disks(self) -> None:
        """Drop saved disks no snapshot row names: a crash between a copy and its row, or
        in the middle of a fork. Read in this order: a copy listed and not being made has
        its row written by the time the rows are read."""
        saved = await self._rt.saved_disks()
        making = set(self.committing)
        named = await self._repo.all_snapshot_disks()
        for kept in self.keeps:
            named |= (await kept())[1]
        for key in saved - making - named:
            log.warning("removing saved disk %s: no snapshot names it", key)
            await self._rt.drop_disk(key)
