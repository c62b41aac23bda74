"""Drives with a size: each one an ext4 filesystem in a sparse file of that size,
loop-mounted on the host and given to the engine as the device of a bind volume.

A full drive is ENOSPC inside the box and nowhere else. This needs loop devices only,
not the XFS project quotas that `--storage-opt size` and volume sizes need (which many
VPS kernels lack). The files live in the engine's data root, so what drives hold also
counts toward the engine's filesystem.

Everything here runs as host root on names paddockd made (`drive_volume`), never on a
path a box gave; the filesystems' contents are the box's, their image files are not
reachable from any box.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import diskcopy
from .loopdev import mount_image

log = logging.getLogger("paddockd.drives")

_VOLUME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")
_IMAGE = ".ext4"
_MOUNT = ".mnt"
BOX_USER = 1000  # the box user's id inside every box; its drive root is theirs
_LOCK = ".lock"
# One change at a time to the folder: a mount racing another mount of the same image (a
# box starting while a drive is made) can set up a second loop device on the same file,
# two kernels' worth of ext4 writing one filesystem; a mount racing a removal leaves a
# deleted image mounted, its loop device held for good. The thread lock orders this
# process's workers, the file lock other processes (another paddockd on this engine).
_THREADS = threading.Lock()
# discard: what a box deletes is given back to the engine's disk (the loop device punches
# holes in the file), or a box writing and deleting in turns would make its file as big
# as its size. errors=remount-ro: a filesystem the engine's full disk failed under stops
# taking writes instead of going on with what it could not store.
KEEP_SPARSE = "noatime,discard,errors=remount-ro"


def run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()}")


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold `folder`'s lock file: one change at a time to what is in it, across processes."""
    with locked_file(folder / _LOCK):
        yield


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold the lock file at `path` (made if missing), across processes."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def make_ext4(
    image: Path,
    size: int,
    owner: int | None = None,
    source: Path | None = None,
    features: tuple[str, ...] = (),
) -> None:
    """An ext4 filesystem of `size` bytes in a new sparse file at `image`: its root owned
    by `owner`, or holding a copy of the folder `source` (owners, modes, xattrs kept). The
    file has its name only once it is formatted: a crash leaves no half-made one."""
    partial = image.with_name(image.name + ".new")
    with open(partial, "wb") as handle:
        handle.truncate(size)
    partial.chmod(0o600)
    # No reserved blocks: the whole size is the box's. Nothing zeroed ahead (the new sparse
    # file reads as zeros already): mke2fs otherwise writes the whole journal, 1 GiB of the
    # engine's disk for every filesystem of 128 GiB or more before a byte is stored (a
    # member's few API calls filled the engine's disk).
    extended = "lazy_itable_init=1,lazy_journal_init=1"
    if owner is not None:
        extended += f",root_owner={owner}:{owner}"
    argv = ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", extended]
    if features:
        argv += ["-O", ",".join(features)]
    if source is not None:
        argv += ["-d", str(source)]
    try:
        run(*argv, str(partial))
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    partial.rename(image)


# Formatted empty filesystems, one per size, owner and folders, kept in a folder of this
# name beside the images made from them (the sweeps look at the folder's own files only).
BLANKS = "blank"
# (path inside the filesystem, mode, uid, gid) of a folder a new filesystem holds.
Folder = tuple[str, int, int, int]


def new_ext4(
    image: Path,
    size: int,
    owner: int | None = None,
    folders: Sequence[Folder] = (),
    features: tuple[str, ...] = (),
) -> None:
    """What make_ext4 makes (with these `folders` in it, their owners and modes as given),
    as a reflink copy of the first one made with the same arguments, kept in BLANKS beside
    `image`: a millisecond instead of mkfs's ten or more. Where the filesystem makes no
    such copies, each is formatted."""
    key = hashlib.sha256(repr((size, owner, sorted(folders), features)).encode()).hexdigest()
    blanks = image.parent / BLANKS
    blank = blanks / f"{key[:32]}{_IMAGE}"
    if blank.is_file():
        with contextlib.suppress(diskcopy.CopyFailed):
            diskcopy.clone(blank, image)
            return
    if folders:
        with tempfile.TemporaryDirectory(dir=image.parent) as tree:
            _folders(Path(tree), folders)
            make_ext4(image, size, owner, Path(tree), features)
    else:
        make_ext4(image, size, owner, None, features)
    # Kept as the next one's source while nothing has touched it yet (best effort: a
    # filesystem without copies, or another box's blank of the same kind made first).
    blanks.mkdir(mode=0o700, exist_ok=True)
    made = blanks / f"{key[:32]}.{os.getpid()}.{threading.get_ident()}.new"
    try:
        diskcopy.clone(image, made)
        made.chmod(0o400)
        os.replace(made, blank)
    except OSError:
        made.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            blanks.rmdir()  # only if empty: nothing to copy from here


def _folders(tree: Path, folders: Sequence[Folder]) -> None:
    for path, mode, uid, gid in sorted(folders):
        folder = tree / path
        folder.mkdir()
        os.chown(folder, uid, gid)
        folder.chmod(mode)


@dataclass(frozen=True)
class DriveFs:
    """The folder of sized drives: NAME.ext4 (the filesystem) and NAME.mnt (where it is
    mounted). `userns_base`: the host id of box root, when boxes run remapped."""

    root: Path
    userns_base: int | None = None

    def _paths(self, volume: str) -> tuple[Path, Path]:
        if not _VOLUME.fullmatch(volume):
            raise ValueError(f"not a drive volume name: {volume!r}")
        return self.root / (volume + _IMAGE), self.root / (volume + _MOUNT)

    def present(self) -> bool:
        """Whether any sized drive exists (else a box's start has nothing to mount)."""
        return self.root.is_dir() and any(self.root.glob("*" + _IMAGE))

    def has(self, volume: str) -> bool:
        return self._paths(volume)[0].exists()

    def mountpoint(self, volume: str) -> str:
        return str(self._paths(volume)[1])

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _THREADS:
            self._prepare_root()
            with locked(self.root):
                yield

    def create(self, volume: str, size: int, owner: int = BOX_USER) -> str:
        """Make and mount the filesystem, its root owned by `owner` (a user in the box);
        where it is mounted. Call only when the engine has no such volume: what is there
        then is a crash's leftover, and goes."""
        with self._locked():
            return self._create(volume, size, owner)

    def _create(self, volume: str, size: int, owner: int) -> str:
        image, point = self._paths(volume)
        self._remove(volume)
        new_ext4(image, size, owner=(self.userns_base or 0) + owner)
        self._mount(image, point)
        with contextlib.suppress(OSError):
            (point / "lost+found").rmdir()  # host root's, and no use to a box
        point.chmod(0o775 if owner else 0o755)
        return str(point)

    def mount(self, volumes: Iterable[str]) -> None:
        """Mount the filesystems of these volumes that have one and are not mounted (after
        a reboot): before a box binds one, or the engine would bind the empty folder under
        it. Each start asks for its own box's volumes only, so another user's broken drive
        never keeps a box from starting, and a start costs the same with 500 drives."""
        if not self.root.is_dir():
            return
        with self._locked():
            for volume in dict.fromkeys(volumes):
                if not _VOLUME.fullmatch(volume):
                    continue  # not a name paddockd gives a drive: not one of these
                image, point = self._paths(volume)
                if image.is_file() and not os.path.ismount(point):
                    self._mount(image, point)

    def usage(self, volume: str) -> tuple[int, int]:
        """(bytes used, bytes the drive holds), as its filesystem counts them."""
        st = os.statvfs(self._paths(volume)[1])
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize

    def sweep(self, volumes: Iterable[str], min_age: float = 600.0) -> list[str]:
        """Remove the filesystems of volumes the engine no longer has (`volumes`: those it
        has), left by a crash between the engine's removal and this one's. Only those
        older than `min_age` seconds: a drive is made before its engine volume."""
        if not self.root.is_dir():
            return []
        keep, gone = set(volumes), []
        with self._locked():
            for image in self.root.glob("*" + _IMAGE):
                volume = image.name.removesuffix(_IMAGE)
                with contextlib.suppress(FileNotFoundError):
                    old = time.time() - image.stat().st_mtime > min_age
                    if volume not in keep and old and _VOLUME.fullmatch(volume):
                        self._remove(volume)
                        gone.append(volume)
        return gone

    def remove(self, volume: str) -> None:
        self._paths(volume)
        if not self.root.is_dir():
            return
        with self._locked():
            self._remove(volume)

    def _remove(self, volume: str) -> None:
        image, point = self._paths(volume)
        if os.path.ismount(point):
            run("umount", str(point))
        image.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            point.rmdir()

    def _prepare_root(self) -> None:
        # Box root (remapped) must pass through to reach a mount it is given; nobody
        # else may list or read the images.
        self.root.mkdir(mode=0o710, exist_ok=True)
        if self.userns_base is not None:
            os.chown(self.root, 0, self.userns_base)

    def _mount(self, image: Path, point: Path) -> None:
        point.mkdir(mode=0o700, exist_ok=True)
        # A box must not gain devices or setuid programs through its own filesystem.
        mount_image(image, point, f"nodev,nosuid,{KEEP_SPARSE}")


def available() -> str | None:
    """Why sized drives cannot be made here, or None."""
    if shutil.which("mkfs.ext4") is None:
        return "mkfs.ext4 is missing (Debian package e2fsprogs)"
    if not Path("/dev/loop-control").exists():
        return "this machine has no loop devices (/dev/loop-control)"
    return None
