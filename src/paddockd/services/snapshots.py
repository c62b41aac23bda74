"""Snapshots, restore and fork: a box's filesystem kept, rewound, or copied."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterator, Sequence

from ..domain.accounts import User
from ..domain.box import Box, BoxState, validate_name
from ..domain.errors import Conflict, InvalidRequest, InvalidState, NotFound, PaddockError
from ..domain.snapshot import Snapshot, validate_label
from ..runtime.base import DiskUsage, Runtime
from ..store.boxes import BoxRepository
from .boxes import BoxService
from .reconciler import Reconciler

MAX_FORKS = 100  # in one call; capacity is the real bound


class SnapshotService:
    def __init__(
        self,
        repo: BoxRepository,
        runtime: Runtime,
        reconciler: Reconciler,
        boxes: BoxService,
        limit: int = 50,
    ) -> None:
        self._limit = limit
        self._repo = repo
        self._rt = runtime
        self._reconciler = reconciler
        self._boxes = boxes

    async def list(self, ref: str, caller: User | None = None) -> tuple[Box, list[Snapshot]]:
        box = await self._boxes.resolve(ref, caller)
        return box, await self._repo.snapshots(box.id)

    async def usage(self, snaps: Sequence[Snapshot]) -> dict[str, DiskUsage]:
        """What each disk copy among `snaps` holds alone and shares, by its disk."""
        return await self._rt.disk_usage([s.disk for s in snaps if s.disk])

    async def find(self, box: Box, ref: str) -> Snapshot:
        for snap in await self._repo.snapshots(box.id):
            if snap.matches(ref):
                return snap
        raise NotFound(
            f"box {box.name} has no snapshot {ref!r} (see `paddock snapshots {box.name}`)"
        )

    async def take(self, ref: str, label: str | None, caller: User | None = None) -> Snapshot:
        """Snapshot a box now; a running box is paused only while its layer is written."""
        box = await self._boxes.resolve(ref, caller)
        self._boxes.capacity.check_disk("a snapshot")
        snaps = await self._repo.snapshots(box.id)
        if len(snaps) >= self._limit:
            raise Conflict(
                f"box {box.name} has {len(snaps)} snapshots, the most a box keeps here; "
                f"delete some first (`paddock snapshots rm {box.name} ID`)"
            )
        if label is not None:
            validate_label(label)
            if any(s.label == label for s in snaps):
                raise Conflict(f"box {box.name} already has a snapshot labelled {label!r}")
        return await self._reconciler.snapshot(box.id, "live", label)

    async def remove(self, ref: str, snap_ref: str, caller: User | None = None) -> None:
        box = await self._boxes.resolve(ref, caller)
        snap = await self.find(box, snap_ref)
        if snap.disk is None and snap.image in await self._reconciler.images_needed(
            except_box=box.id
        ):
            users = [
                b.name
                for b in await self._repo.all()
                if b.id != box.id and snap.image in (b.image, b.current_snapshot)
            ] or ["(a container still running on it)"]
            raise Conflict(
                f"snapshot {snap.seq} of {box.name} is the base of box(es) {', '.join(users)}",
                details={"boxes": users},
            )
        await self._reconciler.remove_snapshot(box.id, snap.seq)

    async def restore(self, ref: str, snap_ref: str, caller: User | None = None) -> Box:
        """Rewind the box's filesystem to a snapshot. Name, type, TTL, drives (and their
        data: drives are not in snapshots) stay as they are."""
        box = await self._boxes.resolve(ref, caller)
        snap = await self.find(box, snap_ref)
        restored = await self._reconciler.rebase(box.id, snap)
        if restored is None:
            raise NotFound(f"box {box.name} was deleted meanwhile")
        return restored

    async def fork(
        self,
        ref: str,
        name: str | None,
        snap_ref: str | None,
        caller: User | None = None,
        type_name: str | None = None,
    ) -> Box:
        """One fork (see `fork_many`)."""
        return (await self.fork_many(ref, [name], snap_ref, caller, type_name))[0]

    async def fork_count(
        self,
        ref: str,
        count: int,
        prefix: str | None,
        snap_ref: str | None,
        caller: User | None = None,
        type_name: str | None = None,
    ) -> builtins.list[Box]:
        """`count` forks at once, named PREFIX-1 .. PREFIX-N (or generated names)."""
        if not 1 <= count <= MAX_FORKS:
            raise InvalidRequest(f"count must be 1 to {MAX_FORKS}")
        if prefix is not None:
            names: list[str | None] = [validate_name(f"{prefix}-{i}") for i in range(1, count + 1)]
        else:
            names = [None] * count
        return await self.fork_many(ref, names, snap_ref, caller, type_name)

    async def fork_many(
        self,
        ref: str,
        names: Sequence[str | None],
        snap_ref: str | None,
        caller: User | None = None,
        type_name: str | None = None,
    ) -> builtins.list[Box]:
        """New boxes from the source's current files (or one of its snapshots), one per
        name (None: a generated one); each changes independently afterwards. A fork keeps
        the type, TTL and drives, and is the source's owner's, whoever asks: its files are
        that user's code, so its drives (by name) and keys must be theirs too. The owner's
        fork of a member's box once mounted the owner's drives under the member's boot
        hooks.

        All or nothing: the new boxes are admitted together (names, capacity, limits,
        disk) before anything is copied, and a failure of any takes back what the others
        made. Where disks copy (runtime/diskcopy.py) the source is copied once, frozen for
        milliseconds, and each fork gets its own copy of that as its first snapshot."""
        source = await self._boxes.resolve(ref, caller)
        owner = self._boxes.owner_of(source, caller)
        type_name = type_name or source.type
        await self._boxes.admissible(names, type_name, owner)
        self._check_size(source, type_name)
        async with self._files_of(source, snap_ref, names) as (image, disk):
            made = await asyncio.gather(
                *(self._fork_one(source, n, type_name, owner, image, disk) for n in names),
                return_exceptions=True,
            )
            failed = [m for m in made if isinstance(m, BaseException)]
            if failed:
                for box in made:
                    if isinstance(box, Box):
                        with contextlib.suppress(PaddockError):
                            await self._boxes.delete(box.id, force=True)
                raise failed[0]
            return [m for m in made if isinstance(m, Box)]

    def _check_size(self, source: Box, type_name: str) -> None:
        """A copy of a disk can grow into a larger type, not shrink into a smaller one."""
        disk_mb = self._boxes.type_named(type_name).disk_mb
        if source.disk_mb and disk_mb and disk_mb < source.disk_mb:
            raise InvalidRequest(
                f"box {source.name} has a disk of {source.disk_mb} MiB; a {type_name} box's "
                f"is {disk_mb} MiB, too small for its files: fork into a type with a disk of "
                f"{source.disk_mb} MiB or more"
            )

    async def _fork_one(
        self,
        source: Box,
        name: str | None,
        type_name: str,
        owner: User | None,
        image: str,
        disk: str | None,
    ) -> Box:
        return await self._boxes.create(
            name,
            type_name,
            source.ttl,
            source.ttl_action.value,
            source.drives,
            image=image,
            network=source.network,
            agent=source.agent,
            caller=owner,
            disk=disk,
            keep=source.keep,
        )

    @contextlib.asynccontextmanager
    async def _files_of(
        self, source: Box, snap_ref: str | None, names: Sequence[str | None]
    ) -> AsyncIterator[tuple[str, str | None]]:
        """The files forks are made from: (image, saved disk or None), for the duration.
        A copy or snapshot taken for the forks goes again afterwards (a fork that failed
        leaves nothing behind; one that was made has copies of its own)."""
        if snap_ref is not None:
            snap = await self.find(source, snap_ref)
            yield snap.image, snap.disk
            return
        if source.state == BoxState.STOPPED and not source.container_id:
            yield source.source_image, source.current_disk
            return
        if source.state not in (BoxState.RUNNING, BoxState.STOPPED):
            raise InvalidState(
                f"box {source.name} is {source.state.value}; fork it once that is done"
            )
        copy = await self._reconciler.save_for_forks(source.id)
        if copy is not None:
            try:
                yield copy
            finally:
                await self._reconciler.drop_saved(copy[1])
            return
        before = source.current_snapshot
        label = f"fork-{names[0] or 'box'}" if len(names) == 1 else None
        taken = await self._reconciler.snapshot(source.id, "fork", label)
        try:
            yield taken.image, None
        except BaseException:
            await self._discard(source.id, taken, before)
            raise

    async def _discard(self, box_id: str, snap: Snapshot, before: str | None) -> None:
        """Take back a snapshot made for a fork that failed (unless a box stands on it)."""
        if snap.image in await self._reconciler.images_needed(except_box=box_id):
            return
        box = await self._repo.get(box_id)
        if box is not None and box.current_snapshot == snap.image:
            await self._repo.update(box, current_snapshot=before)
        await self._reconciler.release_image(snap.image)
        await self._repo.delete_snapshot(box_id, snap.seq)
