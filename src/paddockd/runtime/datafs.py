"""The box engine's data root on a filesystem of its own, with per-box disk sizes where
the kernel can enforce them.

The data root lives on XFS in a sparse file, loop-mounted before the engine starts. The
file grows only as boxes write, and its size caps the engine as a whole: boxes that fill
their disk fill this filesystem, never the host's, so paddockd's database (on the host
filesystem) and the rest of the machine carry on.

Docker limits a container's writable layer (`--storage-opt size=`) and a volume
(`-o size=`) only on XFS mounted with project quotas; the filesystem is mounted so when
the kernel has XFS quota support (CONFIG_XFS_QUOTA), and each box then has a size of its
own. Without it the cap is engine-wide and `paddock status` says so. Where a loop device
or mkfs.xfs is missing, the engine runs on the host's filesystem as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import EngineConfig
from . import drivefs
from .loopdev import mount_image

log = logging.getLogger("paddockd.datafs")

GIB = 1 << 30
# A sparse file may promise more than the host has; keep it within what is free, so the
# loop device never meets a full host filesystem under it.
_SHARE_OF_FREE = 0.8
# Below this the box image alone would not fit comfortably: stay on the host filesystem.
_SMALLEST = 16 * GIB


@dataclass(frozen=True)
class DataFs:
    path: str
    own: bool  # on a filesystem of its own (the host's disk cannot fill through it)
    quotas: bool  # per-box sizes are enforced
    reason: str  # what is missing, when either is not
    total: int  # bytes
    free: int


@dataclass(frozen=True)
class _Mount:
    source: str
    fstype: str
    options: frozenset[str]


def _mounts() -> Iterator[tuple[str, _Mount]]:
    """(mount point, what is mounted there), from the kernel's table."""
    with open("/proc/self/mountinfo") as table:
        for line in table:
            fields = line.split()
            dash = fields.index("-")
            point = fields[4].encode().decode("unicode_escape")  # octal escapes like \040
            options = set(fields[5].split(",")) | set(fields[dash + 3].split(","))
            yield point, _Mount(fields[dash + 2], fields[dash + 1], frozenset(options))


def _mount_at(path: Path) -> _Mount | None:
    """What is mounted exactly at `path` (the last mount wins)."""
    target = os.path.realpath(path)
    found = None
    for point, mount in _mounts():
        if point == target:
            found = mount
    return found


def has_quotas(mount: _Mount | None) -> bool:
    return (
        mount is not None and mount.fstype == "xfs" and bool({"prjquota", "pquota"} & mount.options)
    )


NO_KERNEL_QUOTAS = (
    "this kernel has no XFS quota support (CONFIG_XFS_QUOTA): the engine's filesystem "
    "caps all boxes together, not each box"
)


def state(cfg: EngineConfig) -> DataFs:
    """The data root as it is now (nothing is changed)."""
    root = Path(cfg.data_root)
    try:
        usage = shutil.disk_usage(root)
    except OSError:
        return DataFs(cfg.data_root, False, False, "the data root does not exist yet", 0, 0)
    mount = _mount_at(root)
    if has_quotas(mount):
        return DataFs(cfg.data_root, True, True, "", usage.total, usage.free)
    if mount is not None and mount.source == _loop_of(cfg.data_image):
        return DataFs(cfg.data_root, True, False, NO_KERNEL_QUOTAS, usage.total, usage.free)
    if not cfg.data_image:
        reason = "[engine] data_image is empty: the engine uses the host's filesystem"
    elif mount is not None:
        reason = f"{cfg.data_root} is a {mount.fstype} mount without project quotas"
    else:
        reason = f"{cfg.data_image} is not mounted at {cfg.data_root}"
    return DataFs(cfg.data_root, mount is not None, False, reason, usage.total, usage.free)


def describe(cfg: EngineConfig) -> str:
    """One line for `paddock status`: how the boxes' disks are limited."""
    found = state(cfg)
    if found.quotas:
        return "each box: its type's disk size (XFS project quotas)"
    if drivefs.available() is None:
        return (
            "each box: its type's disk size, for its root and for its /var/lib/docker "
            "(a filesystem of its own for each)"
        )
    if found.own:
        return f"all boxes together: {found.total / GIB:.0f} GiB ({found.reason})"
    return f"none: boxes write to the host's filesystem ({found.reason})"


def _loop_of(image: str) -> str | None:
    """The loop device backing `image`, if one is attached."""
    if not image:
        return None
    done = subprocess.run(["losetup", "-j", image], capture_output=True, text=True)
    first = done.stdout.split(":", 1)[0].strip()
    return first or None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()}")


def default_size(image: Path) -> int:
    free = shutil.disk_usage(image.parent).free
    size = int(free * _SHARE_OF_FREE) // GIB * GIB
    if size < _SMALLEST:
        raise OSError(
            f"only {free // GIB} GiB free next to {image}: too little for a filesystem of "
            "the engine's own (set [engine] data_size_gb, or free some space)"
        )
    return size


@contextlib.contextmanager
def engine_lock(cfg: EngineConfig) -> Iterator[None]:
    """One process at a time prepares and starts the engine (install.sh and paddockd's
    own watchdog may both try)."""
    lock = Path(cfg.data_root).parent / "engine.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def ensure(cfg: EngineConfig) -> DataFs:
    """Mount the data root's XFS image, creating it (and moving an existing data root onto
    it) on first use. Call with the engine stopped and `engine_lock` held. Never raises for
    a host that cannot do it: the engine then runs as before, and the state says why."""
    root = Path(cfg.data_root)
    if not cfg.data_image or _mount_at(root) is not None:
        return state(cfg)
    image = Path(cfg.data_image)
    try:
        if not image.exists():
            _create(image, cfg.data_size_gb * GIB or default_size(image))
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            _move_onto(image, root)
        _mount(image, root)
    except OSError as exc:
        log.error("the engine stays on the host's filesystem: %s", exc)
        found = state(cfg)
        return DataFs(found.path, False, False, str(exc), found.total, found.free)
    found = state(cfg)
    if not found.quotas:
        log.warning("disk sizes: %s", found.reason)
    return found


def _mount(image: Path, target: Path) -> None:
    # By loopdev's direct I/O: what boxes write is cached once, not also as the image's.
    try:
        mount_image(image, target, "prjquota,noatime", fstype="xfs")
    except OSError:
        # Most likely a kernel without XFS quotas: the filesystem still caps the engine.
        mount_image(image, target, "noatime", fstype="xfs")


def _create(image: Path, size: int) -> None:
    if shutil.which("mkfs.xfs") is None:
        raise OSError("mkfs.xfs is missing (Debian package xfsprogs; ./install.sh adds it)")
    image.parent.mkdir(parents=True, exist_ok=True)
    partial = image.with_name(image.name + ".new")
    with open(partial, "wb") as handle:
        handle.truncate(size)
    partial.chmod(0o600)
    try:
        _run("mkfs.xfs", "-q", "-f", str(partial))
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    # Only a formatted file has the final name: a crash above leaves nothing half-made.
    partial.rename(image)
    log.info("created %s (%d GiB, sparse) for the engine's data", image, size // GIB)


def _move_onto(image: Path, root: Path) -> None:
    """An engine that ran on the host filesystem keeps its images and boxes: copy them
    (ownership, modes, xattrs, hard links) onto the new filesystem, then drop the old."""
    # A stopped engine leaves its data root bound onto itself, and a killed one its
    # containers' filesystems mounted: views of what is copied anyway, which copying (or
    # removing) through would duplicate (or damage). The engine mounts them again.
    inside = sorted({p for p, _ in _mounts() if p.startswith(os.path.realpath(root) + "/")})
    for point in reversed(inside):  # the deepest first
        _run("umount", point)
    staging = root.with_name(root.name + ".moving")
    staging.mkdir(exist_ok=True)
    _mount(image, staging)
    try:
        log.info("moving the engine's data from %s onto %s", root, image)
        _run("cp", "-a", f"{root}/.", str(staging))
    finally:
        _run("umount", str(staging))
    staging.rmdir()
    old = root.with_name(root.name + ".old")
    root.rename(old)
    root.mkdir(mode=0o710)
    shutil.rmtree(old)


def grow(cfg: EngineConfig, size_gb: int) -> DataFs:
    """Make the data filesystem `size_gb` GiB (never smaller: XFS cannot shrink)."""
    image = Path(cfg.data_image)
    current = image.stat().st_size
    if size_gb * GIB < current:
        raise ValueError(f"{image} is {current // GIB} GiB already; XFS cannot shrink")
    with open(image, "r+b") as handle:
        handle.truncate(size_gb * GIB)
    mount = _mount_at(Path(cfg.data_root))
    if mount is not None and mount.source.startswith("/dev/loop"):
        _run("losetup", "-c", mount.source)
        _run("xfs_growfs", cfg.data_root)
    return state(cfg)
