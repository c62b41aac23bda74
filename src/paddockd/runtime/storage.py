"""What a box has on disk besides what the engine gives every container: the sizes of its
writable layer and its /var/lib/docker, and its run folder. Blocking: call in a thread.

The engine sizes a layer only on XFS with project quotas (`--storage-opt size`, in
docker.py); everywhere else the layer gets a filesystem of its own (boxdisk.py), and the
box's Docker volume is a sized one (drivefs.py) wherever loop devices exist.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import docker.errors

from ..domain.errors import PaddockError, SnapshotTooLarge
from . import diskcopy, diskfile, drivefs, runfs
from .base import LABEL_INSTANCE, LABEL_SIZE
from .boxdisk import BoxDisks
from .drivefs import DriveFs

log = logging.getLogger("paddockd.runtime")
_T = TypeVar("_T")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


class BoxStorage:
    """`api`: the engine's docker-py client, when asked for. `drives`: where sized
    volumes' filesystems live; `disks`: where layers' do; `userns_base`: box root's uid."""

    def __init__(
        self,
        api: Callable[[], Any],
        drives: DriveFs | None,
        disks: Path | None,
        userns_base: int | None,
        instance: str = "default",
    ) -> None:
        self._api = api
        self._drives = drives
        self._disks_root = disks
        self._instance = instance
        self._disks: BoxDisks | None = None  # once the engine said where its layers are
        self._copies: bool | None = None
        self._userns_base = userns_base

    def can_size(self) -> bool:
        return self._drives is not None and self._disks_root is not None and not drivefs.available()

    def record_sized_volume(self, name: str, size_mb: int) -> bool:
        """Record the volume `name` with the engine as a filesystem of `size_mb` MiB,
        unless the engine has it (a box's volume made before sizes existed keeps working,
        unsized) or sizes cannot be made here; whether its filesystem is to be made
        (`make_sized_volume`), which may be done beside the container's create: the engine
        mounts a volume at a container's start, not before."""
        if not self.can_size():
            return False
        assert self._drives is not None
        try:
            labels = self._api().inspect_volume(name).get("Labels") or {}
        except docker.errors.NotFound:
            self._api().create_volume(
                name=name,
                driver="local",
                driver_opts={"type": "none", "o": "bind", "device": self._drives.mountpoint(name)},
                # The instance's: a volume whose box never came to be (a crash between
                # this and the container's create) is found and removed by its sweep.
                labels={LABEL_SIZE: str(size_mb), LABEL_INSTANCE: self._instance},
            )
            return True
        # One recorded by a create that a crash cut short has no filesystem yet.
        return LABEL_SIZE in labels and not self._drives.has(name)

    def make_sized_volume(self, name: str, size_mb: int) -> None:
        assert self._drives is not None
        try:
            self._drives.create(name, size_mb << 20, owner=0)  # box root's
        except (OSError, ValueError) as exc:
            raise PaddockError(f"could not make the box's volume {name}: {exc}") from exc

    def drop_volumes(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(docker.errors.APIError):
                self._api().remove_volume(name)
            if self._drives is not None and self._drives.has(name):
                try:
                    self._drives.remove(name)
                except OSError as exc:
                    log.error("removing the filesystem of volume %s: %s", name, exc)

    def _box_disks(self) -> BoxDisks | None:
        if self._disks is None and self._disks_root is not None:
            root = Path(str(self._api().info()["DockerRootDir"]))
            self._disks = BoxDisks(self._disks_root, root / "overlay2", self._instance)
        return self._disks

    def copies_disks(self) -> bool:
        """Whether boxes get disks of their own here that copy at the speed of metadata
        (a filesystem with reflinks under them): snapshots, restores and forks are then
        copies of a box's disk, not engine commits."""
        if self._copies is None:
            disks = self._box_disks() if self.can_size() else None
            if disks is None:
                self._copies = False
            else:
                disks.root.mkdir(mode=0o700, exist_ok=True)
                self._copies = diskcopy.reflinks(disks.root)
        return self._copies

    def _saved(self, what: str, work: Callable[[BoxDisks], _T]) -> _T:
        disks = self._box_disks()
        if disks is None:
            raise PaddockError(f"{what}: boxes have no disks of their own on this server")
        try:
            return work(disks)
        except (OSError, ValueError) as exc:
            raise PaddockError(f"{what}: {exc}") from exc

    def save_disk(self, cid: str, key: str) -> bool:
        """Copy the container's disk as the saved disk `key`; False if it has none."""
        disks = self._box_disks()
        if disks is None or not disks.size(cid):
            return False
        state = self._api().inspect_container(cid).get("State") or {}
        running = bool(state.get("Running"))
        self._saved("could not copy the box's disk", lambda d: d.save(cid, key, running))
        return True

    def load_disk(self, cid: str, key: str) -> bool:
        """Give a container that is not running a copy of saved disk `key` as its disk;
        False if it has no disk of its own."""
        disks = self._box_disks()
        if disks is None or not disks.size(cid):
            return False
        return self._saved("could not restore the box's disk", lambda d: d.load(cid, key))

    def copy_disk(self, source: str, key: str) -> None:
        self._saved("could not copy a saved disk", lambda d: d.copy_saved(source, key))

    def drop_disk(self, key: str) -> None:
        if self._box_disks() is not None:
            self._saved("could not remove a saved disk", lambda d: d.drop_saved(key))

    def saved_disks(self) -> set[str]:
        disks = self._box_disks()
        return disks.saved_keys() if disks is not None else set()

    def disk_usage(self, keys: list[str]) -> dict[str, diskcopy.Usage]:
        disks = self._box_disks()
        found: dict[str, diskcopy.Usage] = {}
        if disks is None:
            return found
        for key in keys:
            with contextlib.suppress(OSError, ValueError):  # removed meanwhile: not shown
                found[key] = disks.saved_usage(key)
        return found

    def open_disk(self, key: str) -> diskfile.DiskReader:
        return self._saved("could not read a saved disk", lambda d: d.open_saved(key))

    def new_disk(self, key: str, size: int) -> diskfile.DiskWriter:
        return self._saved("could not make a saved disk", lambda d: d.receive(key, size))

    def give_disk(self, cid: str, size: int, source: str | None = None) -> None:
        """Put the new container's writable layer on a filesystem of `size` bytes: a new
        one, or a copy of the saved disk `source`."""
        disks = self._box_disks()
        assert disks is not None
        driver = self._api().inspect_container(cid).get("GraphDriver") or {}
        upper = (driver.get("Data") or {}).get("UpperDir")
        if driver.get("Name") != "overlay2" or not upper:
            raise PaddockError(
                f"the box engine's storage driver is {driver.get('Name')!r}, not overlay2: "
                "boxes cannot have disk sizes (set the box types' disk_mb to 0)"
            )
        try:
            disks.attach(cid, str(upper), size, source)
        except (OSError, ValueError) as exc:
            raise PaddockError(f"could not give the box a disk of its own: {exc}") from exc

    def own_disk(self, cid: str, required: bool = False) -> None:
        """Mount the container's layer filesystem if it has one (after a reboot or an
        engine restart): before the engine mounts its root, or it would see the empty
        folder under it. `required`: the container was made to have one."""
        disks = self._box_disks()
        if disks is None:
            return
        try:
            if not disks.ensure(cid) and required:
                raise PaddockError(
                    f"the disk of container {cid[:12]} is missing from {disks.root}: "
                    "its files are gone; restore the box from a snapshot"
                )
        except (OSError, ValueError) as exc:
            raise PaddockError(f"the box's disk did not mount: {exc}") from exc

    def check_commit(self, cid: str, upper_dir: str, limit: int) -> None:
        """Refuse to commit a writable layer whose files, written out whole as a commit
        writes them (holes as zeros), pass `limit` bytes: a 10 GB box could otherwise
        make a sparse file of terabytes and fill the engine's disk at its next stop.
        The layer is the box's to shape: walked without following a link."""
        total = 0
        for folder, _dirs, names in os.walk(upper_dir, followlinks=False):
            for name in names:
                with contextlib.suppress(OSError):
                    info = os.lstat(os.path.join(folder, name))
                    if stat.S_ISREG(info.st_mode):
                        total += info.st_size
            if total > limit:
                raise SnapshotTooLarge(
                    f"a snapshot of the box would write {_gib(total)} or more (its sparse "
                    f"files count whole there), more than its disk of {_gib(limit)}: remove "
                    "or truncate the large sparse files (`ls -lsS` shows them), then try again"
                )

    def disk_size(self, cid: str) -> int | None:
        disks = self._box_disks()
        return disks.size(cid) if disks is not None else None

    def run_folder(self, folder: Path) -> None:
        try:
            runfs.ensure(folder, self._userns_base or 0)
        except OSError as exc:
            raise PaddockError(f"could not make the box's run folder: {exc}") from exc

    def release(self, cid: str, run: Path | None) -> None:
        """After the engine removed the container: its run folder and its disk."""
        if run is not None:
            runfs.release(run)
        disks = self._box_disks()
        if disks is not None:
            try:
                disks.release(cid)
            except (OSError, ValueError) as exc:
                # The container is gone; a later sweep takes what is left.
                log.error("releasing the disk of container %s: %s", cid[:12], exc)

    def sweep(self) -> None:
        """Drop what removed containers and volumes left behind (a crash between the
        engine's removal and paddockd's): layers' and volumes' filesystems."""
        api = self._api()
        try:
            disks = self._box_disks()
            if disks is not None and disks.root.is_dir():
                disks.thaw_idle()
            if disks is not None and disks.root.is_dir() and disks.cids():
                disks.sweep(lambda: [str(c["Id"]) for c in api.containers(all=True)])
            if self._drives is not None and self._drives.present():
                volumes = api.volumes().get("Volumes") or ()
                for gone in self._drives.sweep(str(v["Name"]) for v in volumes):
                    log.warning("removed the filesystem of volume %s, which is gone", gone)
        except OSError as exc:  # the next pass tries again
            log.error("sweeping what removed containers and volumes left: %s", exc)
