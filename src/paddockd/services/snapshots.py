"""Snapshots, restore and fork: a box's filesystem kept, rewound, or copied."""

from __future__ import annotations

from ..domain.accounts import User
from ..domain.box import Box, BoxState
from ..domain.errors import Conflict, InvalidState, NotFound
from ..domain.snapshot import Snapshot, validate_label
from ..runtime.base import Runtime
from ..store.boxes import BoxRepository
from .boxes import BoxService
from .reconciler import Reconciler


class SnapshotService:
    def __init__(
        self, repo: BoxRepository, runtime: Runtime, reconciler: Reconciler, boxes: BoxService
    ) -> None:
        self._repo = repo
        self._rt = runtime
        self._reconciler = reconciler
        self._boxes = boxes

    async def list(self, ref: str, caller: User | None = None) -> tuple[Box, list[Snapshot]]:
        box = await self._boxes.resolve(ref, caller)
        return box, await self._repo.snapshots(box.id)

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
        if label is not None:
            validate_label(label)
            if any(s.label == label for s in await self._repo.snapshots(box.id)):
                raise Conflict(f"box {box.name} already has a snapshot labelled {label!r}")
        return await self._reconciler.snapshot(box.id, "live", label)

    async def remove(self, ref: str, snap_ref: str, caller: User | None = None) -> None:
        box = await self._boxes.resolve(ref, caller)
        snap = await self.find(box, snap_ref)
        if snap.image in await self._reconciler.images_needed(except_box=box.id):
            users = [
                b.name
                for b in await self._repo.all()
                if b.id != box.id and snap.image in (b.image, b.current_snapshot)
            ] or ["(a container still running on it)"]
            raise Conflict(
                f"snapshot {snap.seq} of {box.name} is the base of box(es) {', '.join(users)}",
                details={"boxes": users},
            )
        if snap.image == box.source_image:
            raise Conflict(
                f"snapshot {snap.seq} holds box {box.name}'s current files; "
                "take a newer snapshot or restore another one first"
            )
        await self._reconciler.release_image(snap.image)
        await self._repo.delete_snapshot(box.id, snap.seq)

    async def restore(self, ref: str, snap_ref: str, caller: User | None = None) -> Box:
        """Rewind the box's filesystem to a snapshot. Name, type, TTL, drives (and their
        data: drives are not in snapshots) stay as they are."""
        box = await self._boxes.resolve(ref, caller)
        snap = await self.find(box, snap_ref)
        restored = await self._reconciler.rebase(box.id, snap.image)
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
        """A new box from the source's current files (or one of its snapshots); the two
        change independently afterwards. The fork keeps the type, TTL and drives, and is
        the source's owner's, whoever asks: its files are that user's code, so its drives
        (by name) and keys must be theirs too. The owner's fork of a member's box once
        mounted the owner's drives under the member's boot hooks.

        All or nothing: the new box is admitted (name, capacity, limits, disk) before any
        snapshot is taken, and a snapshot taken for a fork that then fails goes again."""
        source = await self._boxes.resolve(ref, caller)
        owner = self._boxes.owner_of(source, caller)
        type_name = type_name or source.type
        await self._boxes.admissible(name, type_name, owner)
        taken: Snapshot | None = None
        before = source.current_snapshot
        if snap_ref is not None:
            image = (await self.find(source, snap_ref)).image
        elif source.state == BoxState.RUNNING or (
            source.state == BoxState.STOPPED and source.container_id
        ):
            taken = await self._reconciler.snapshot(source.id, "fork", f"fork-{name or 'box'}")
            image = taken.image
        elif source.state == BoxState.STOPPED:
            image = source.source_image
        else:
            raise InvalidState(
                f"box {source.name} is {source.state.value}; fork it once that is done"
            )
        try:
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
            )
        except BaseException:
            if taken is not None:
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
