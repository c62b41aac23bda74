"""E2B's snapshots as Paddock's: a snapshot is one of a box's snapshots (services/snapshots.py),
its E2B id `BOX_ID:SEQ` (E2B's own look: `template:tag`), usable as a template to create a
sandbox from. A name given at creation is the snapshot's label. Unlike E2B's, a snapshot
belongs to its box: it goes when its sandbox is killed (unless a sandbox made from it still
runs on it); docs/e2b.md says so. Paddock's automatic stop snapshots (a pause) are not shown."""

from __future__ import annotations

import re

from ...domain.accounts import User
from ...domain.box import Box, looks_like_id
from ...domain.errors import NotFound
from ...domain.snapshot import Snapshot
from ..boxes import BoxService
from ..snapshots import SnapshotService
from .listing import decode_token, encode_token

_ID = re.compile(r"^([0-9a-f]{6,32}):([0-9]{1,9})$")


def snapshot_id(snap: Snapshot) -> str:
    return f"{snap.box_id}:{snap.seq}"


def parse_snapshot_id(ref: str) -> tuple[str, int] | None:
    """(box id, seq) of an E2B snapshot id, None when `ref` is not one (a template name)."""
    found = _ID.match(ref)
    return (found.group(1), int(found.group(2))) if found else None


def names(snap: Snapshot) -> list[str]:
    return [snap.label] if snap.label else []


def _valid_key(ref: str) -> bool:
    return parse_snapshot_id(ref) is not None


class SandboxSnapshots:
    def __init__(self, boxes: BoxService, snapshots: SnapshotService) -> None:
        self._boxes = boxes
        self._snapshots = snapshots

    async def find(self, caller: User, ref: str) -> tuple[Box, Snapshot]:
        """The snapshot an id names, if its box is the caller's to see."""
        parsed = parse_snapshot_id(ref)
        missing = NotFound(f"snapshot {ref!r} not found (its sandbox may have been killed)")
        if parsed is None:
            raise missing
        box_id, seq = parsed
        try:
            box = await self._boxes.resolve(box_id, caller)
            snap = await self._snapshots.find(box, str(seq))
        except NotFound:
            raise missing from None
        if box.id != box_id or snap.automatic:
            raise missing
        return box, snap

    async def take(self, caller: User, box: Box, name: str | None) -> Snapshot:
        """A snapshot of the box now (paused only while its layer is written). A name the
        box's snapshots already have is refused (E2B would move it to the new one)."""
        return await self._snapshots.take(box.id, name, caller)

    async def fork(self, caller: User, source: Box, snap: Snapshot) -> Box:
        """A new box of the caller's from the snapshot, with the source's type and TTL."""
        return await self._snapshots.fork(source.id, None, str(snap.seq), caller)

    async def _all(self, caller: User, box: Box) -> list[Snapshot]:
        _, snaps = await self._snapshots.list(box.id, caller)
        return [s for s in snaps if not s.automatic]

    async def listed(
        self,
        caller: User,
        sandbox_id: str | None,
        name: str | None,
        limit: int,
        token: str | None,
    ) -> tuple[list[Snapshot], str | None]:
        """The caller's snapshots, oldest first, one page; and the next page's token."""
        boxes = await self._boxes.listed(caller)
        if sandbox_id is not None:
            if not looks_like_id(sandbox_id):
                return [], None
            boxes = [b for b in boxes if b.id == sandbox_id]
        found = [
            s
            for b in boxes
            for s in await self._all(caller, b)
            if name is None or name in (s.label, snapshot_id(s))
        ]
        found.sort(key=lambda s: (s.created_at.timestamp(), snapshot_id(s)))
        if token:
            after = decode_token(token, _valid_key)
            found = [s for s in found if (s.created_at.timestamp(), snapshot_id(s)) > after]
        if len(found) <= limit:
            return found, None
        shown = found[:limit]
        return shown, encode_token((shown[-1].created_at.timestamp(), snapshot_id(shown[-1])))

    async def delete(self, caller: User, ref: str) -> None:
        box, snap = await self.find(caller, ref)
        await self._snapshots.remove(box.id, str(snap.seq), caller)
