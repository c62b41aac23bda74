"""Named drives: engine volumes mounted at /mnt/<name>; they outlive every box.

Drives are per user, like provider keys (see `Holders`): each member has their own, the
owner accounts share the owner's, and names are per user, so two users may each have a
`data`. A box mounts its owner's drives. A member sees only theirs; another's answers 404
like one that does not exist. The owner sees everyone's and names a member's by adding
`owner` (a username, or the id of a removed account, as `drive ls` shows it)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .. import faults
from ..domain.accounts import Holders, User, holder_of, sees
from ..domain.box import Box, BoxState
from ..domain.errors import Conflict, InvalidRequest, NotFound
from ..domain.snapshot import parse_drive, validate_drive_name
from ..runtime.base import LABEL_DRIVE, LABEL_INSTANCE, LABEL_OWNER, Runtime, VolumeInfo
from ..store.boxes import BoxRepository
from .accounts import AccountService
from .capacity import Capacity
from .reconciler import drive_volume

# A drive made with a size holds that much (its own filesystem); one without grows
# within the engine's disk.
LABEL_CAPACITY = "paddock.drive.capacity_mb"
MIN_CAPACITY_MB = 64
MAX_CAPACITY_MB = 16 << 20  # 16 TiB: a typo's guard, not a policy


@dataclass(frozen=True)
class DriveUsage:
    name: str
    size: int
    boxes: list[str]
    holder: str | None  # whose: a member's id, None for the owner's
    capacity_mb: int | None = None


def capacity_mb(labels: dict[str, str]) -> int | None:
    """A sized drive's size (MiB) from its volume's labels; None for none (or a label that
    is not the plain number this module writes: backups bring labels back)."""
    text = labels.get(LABEL_CAPACITY, "")
    return int(text) or None if re.fullmatch(r"[0-9]{1,9}", text) else None


def _volume_holder(volume: VolumeInfo) -> str | None:
    # Volumes from before accounts have no owner label: they are the owner's.
    return volume.labels.get(LABEL_OWNER) or None


def _mounts(box: Box, name: str, holder: str | None, holders: Holders) -> bool:
    """Whether `box` mounts the holder's drive `name` (a box mounts its owner's)."""
    return holders.of(box.owner_id) == holder and name in (parse_drive(d)[0] for d in box.drives)


def _users(name: str, holder: str | None, boxes: list[Box], holders: Holders) -> list[str]:
    """The boxes that mount the holder's drive `name`. A box being deleted does not: its
    container goes first (`DriveService.remove` waits for it)."""
    return [
        b.name for b in boxes if b.state != BoxState.DELETING and _mounts(b, name, holder, holders)
    ]


def _missing(name: str, owner: str | None) -> NotFound:
    whose = f" of {owner}" if owner else ""
    return NotFound(f"no drive named {name!r}{whose} (see `paddock drive ls`)")


class DriveService:
    def __init__(
        self,
        repo: BoxRepository,
        runtime: Runtime,
        instance: str,
        accounts: AccountService,
        capacity: Capacity | None = None,
        deletions: Callable[[list[str]], Awaitable[bool]] | None = None,
    ) -> None:
        self._repo = repo
        self._rt = runtime
        self._labels = {LABEL_INSTANCE: instance}
        self._accounts = accounts
        self._capacity = capacity
        # Waits for these deleted boxes' containers to go (they leave in the background).
        self._deletions = deletions

    def configure(self, capacity: Capacity) -> None:
        self._capacity = capacity

    async def _find(self, name: str, holder: str | None) -> VolumeInfo | None:
        found = await self._rt.volumes({**self._labels, LABEL_DRIVE: name})
        return next((v for v in found if _volume_holder(v) == holder), None)

    async def ensure(
        self, name: str, holder: str | None = None, capacity_mb: int | None = None
    ) -> VolumeInfo:
        """The holder's drive, created empty (owned by the box user) if it does not exist
        yet; `capacity_mb`: the most it holds (None: no size of its own)."""
        validate_drive_name(name)
        labels = {**self._labels, LABEL_DRIVE: name}
        if holder is not None:
            labels[LABEL_OWNER] = holder
        if capacity_mb is not None:
            labels[LABEL_CAPACITY] = str(capacity_mb)
        size = capacity_mb << 20 if capacity_mb is not None else None
        return await self._find(name, holder) or await self._rt.create_volume(
            drive_volume(name, holder), labels, size
        )

    async def folder(self, name: str, holder: str | None) -> tuple[str, int | None]:
        """Where the holder's drive's files are on the host (mounted if need be), and the
        most it holds in bytes (None: no size of its own)."""
        volume = await self._find(name, holder)
        if volume is None:
            raise _missing(name, None)
        size = capacity_mb(volume.labels)
        return await self._rt.volume_folder(volume), size << 20 if size is not None else None

    async def create(
        self, name: str, caller: User | None = None, capacity_mb: int | None = None
    ) -> DriveUsage:
        validate_drive_name(name)
        if capacity_mb is not None and not MIN_CAPACITY_MB <= capacity_mb <= MAX_CAPACITY_MB:
            raise InvalidRequest(
                f"a drive's size is {MIN_CAPACITY_MB} MiB to {MAX_CAPACITY_MB >> 20} TiB, "
                f"not {capacity_mb} MiB"
            )
        holder = holder_of(caller)
        if await self._find(name, holder):
            raise Conflict(f"a drive named {name!r} already exists")
        if capacity_mb is not None and self._capacity is not None:
            # Its filesystem's own metadata is written on the engine's disk at once.
            self._capacity.check_disk("a drive with a size")
        await self.ensure(name, holder, capacity_mb)
        faults.point("drive.created")
        return DriveUsage(name, 0, [], holder, capacity_mb)

    async def all(self, caller: User | None = None) -> list[DriveUsage]:
        """The caller's drives (the owner: everyone's)."""
        holders = await self._accounts.holders()
        boxes = await self._repo.all()
        result = []
        for volume in await self._rt.volumes(self._labels):
            name, holder = volume.labels.get(LABEL_DRIVE), _volume_holder(volume)
            if name and sees(caller, holder):
                size = await self._rt.volume_usage(volume)
                users = _users(name, holder, boxes, holders)
                result.append(DriveUsage(name, size, users, holder, capacity_mb(volume.labels)))
        return sorted(result, key=lambda d: (d.name, d.holder or ""))

    async def remove(self, name: str, caller: User | None = None, owner: str | None = None) -> None:
        """Delete the caller's drive `name`, or `owner`'s (a username or a removed account's
        id), which only the owner may name: to a member another's is missing."""
        validate_drive_name(name)
        holder = await self._holder_named(name, caller, owner)
        volume = await self._find(name, holder)
        if volume is None:
            raise _missing(name, owner)
        boxes, holders = await self._repo.all(), await self._accounts.holders()
        going = [
            b.id
            for b in boxes
            if b.state == BoxState.DELETING and _mounts(b, name, holder, holders)
        ]
        # Only these are waited for, and not for long: the engine removes containers one
        # at a time, and a queue of others' deletes must not hold a drive's removal.
        if going and self._deletions is not None and not await self._deletions(going):
            raise Conflict(
                f"drive {name} is still mounted by a box being deleted; try again in a moment",
                details={"boxes": going},
            )
        users = _users(name, holder, boxes, holders)
        if users:
            raise Conflict(
                f"drive {name} is used by box(es) {', '.join(users)}; remove them first",
                details={"boxes": users},
            )
        await self._rt.remove_volume(volume.name)
        faults.point("drive.removed")

    async def _holder_named(self, name: str, caller: User | None, owner: str | None) -> str | None:
        """Whose drive `name` the caller means: their own unless they name `owner`."""
        mine = holder_of(caller)
        if owner is None:
            return mine
        if caller is None or caller.is_owner:
            user = await self._accounts.named(owner)
            # A removed account's username is gone (and may be someone's again): its
            # drives are named by its id.
            return user.holder if user is not None else owner
        if owner in (caller.username, caller.id):
            return mine
        raise _missing(name, owner)
