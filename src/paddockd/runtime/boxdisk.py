"""Each box's writable layer on a filesystem of its own size, where the kernel has no XFS
quotas for the engine's `--storage-opt size`.

After the engine makes a container, its overlay layer folder (`overlay2/<id>`: `diff`,
`work` and the engine's two small files) is copied into an ext4 filesystem in a sparse
file of the box's size, which is then loop-mounted over that folder. The engine mounts
the box's root from it as before; a full layer is ENOSPC in the box and nowhere else,
and `df /` in the box shows its size. The engine's removal of the container unmounts it
(it detaches whatever is mounted in a folder it deletes); the file goes after it.

Mounts do not outlive a reboot: every layer is mounted again before its box starts
(`ensure`), never later, or the engine would mount the empty folder under it.

Paths here are the engine's (`GraphDriver.Data.UpperDir`) and paddockd's own, checked to
lie in the engine's layer folder; nothing a box names is followed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import diskcopy, diskfile
from .drivefs import KEEP_SPARSE, Folder, locked, locked_file, make_ext4, new_ext4, run
from .loopdev import mount_image

log = logging.getLogger("paddockd.disks")

_CID = re.compile(r"[0-9a-f]{64}")
_IMAGE = ".ext4"
_LAYER = ".layer"  # the layer folder it mounts on, as the engine named it
_LOCK = ".lock"  # held by a copy of the disk and its watchdog (diskcopy.py)
_ENGINE = ".engine"  # the engine's own files of a layer whose disk is a copy (see `attach`)
_ENGINE_FILES = ("link", "lower")
# inline_data: a small folder lives in its inode, no block needed. The engine makes folders
# in the layer each time it mounts the box's root (`merged`, overlayfs's `work/work`); on a
# full disk, without this, the box could not be stopped, snapshotted, resumed or copied
# from again.
_FEATURES = ("inline_data",)
# A saved disk (a snapshot's, or one taken for forks): FOLDER/NAME, both paddockd's words.
_KEY = re.compile(r"[0-9a-z]{1,64}/[0-9a-z]{1,64}")
SAVED = "saved"
_GROW_TIMEOUT = 120
_INSTANCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_THREADS = threading.Lock()


@dataclass(frozen=True)
class BoxDisks:
    """`root`: where the filesystems' files live (root's alone). `layers`: the engine's
    overlay2 folder, the only place a layer may be mounted. `instance`: the paddockd whose
    saved disks these are (several may share one engine; each sweeps only its own)."""

    root: Path
    layers: Path
    instance: str = "default"

    def _paths(self, cid: str) -> tuple[Path, Path]:
        if not _CID.fullmatch(cid):
            raise ValueError(f"not a container id: {cid!r}")
        return self.root / (cid + _IMAGE), self.root / (cid + _LAYER)

    def _layer(self, upper_dir: str) -> Path:
        """The layer folder of a container whose upper directory the engine named."""
        upper = Path(upper_dir)
        layer = upper.parent
        if (
            upper.name != "diff"
            or layer.parent != self.layers
            or not _CID.fullmatch(layer.name.removesuffix("-init"))
            or layer.is_symlink()
        ):
            raise ValueError(f"not a layer of the engine's: {upper_dir!r}")
        return layer

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _THREADS:
            self.root.mkdir(mode=0o700, exist_ok=True)
            with locked(self.root):
                yield

    def saved(self, key: str) -> Path:
        """Where the saved disk `key` lives (on the layers' filesystem: copies share)."""
        if not _KEY.fullmatch(key) or not _INSTANCE.fullmatch(self.instance):
            raise ValueError(f"not a saved disk's name: {self.instance}:{key!r}")
        return self.root / SAVED / self.instance / (key + _IMAGE)

    def open_saved(self, key: str) -> diskfile.DiskReader:
        return diskfile.DiskReader(self.saved(key))

    def receive(self, key: str, size: int) -> diskfile.DiskWriter:
        """A new saved disk `key`, written by the caller (an import)."""
        dest = self.saved(key)
        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if dest.exists():
            raise FileExistsError(f"saved disk {key} exists")
        return diskfile.DiskWriter(dest, size)

    def attach(self, cid: str, upper_dir: str, size: int, source: str | None = None) -> None:
        """Give a container that has not run yet its own filesystem of `size` bytes: a new
        one, or a copy of the saved disk `source` (grown to `size` if it is smaller)."""
        layer = self._layer(upper_dir)
        image, note = self._paths(cid)
        with self._locked():
            if image.exists():
                return
            note.write_text(str(layer))
            folders = _fresh(layer) if source is None else None
            if source is None and folders is None:
                make_ext4(image, size, source=layer, features=_FEATURES)
            else:
                # A copy (of a saved disk, or of a blank one holding a new layer's folders)
                # holds another layer's engine files or none: this one's (its short name,
                # its lower layers) are kept aside and put back at every mount.
                files = {n: (layer / n).read_text() for n in _ENGINE_FILES}
                image.with_name(cid + _ENGINE).write_text(json.dumps(files))
                if source is None:
                    new_ext4(image, size, folders=folders or (), features=_FEATURES)
                else:
                    self._copy_saved(source, image, size)
            self._mount(image, layer)

    def _copy_saved(self, source: str, image: Path, size: int) -> None:
        partial = image.with_name(image.name + ".new")  # swept if a crash leaves it
        diskcopy.clone(self.saved(source), partial)
        try:
            if partial.stat().st_size < size:
                _grow(partial, size)
            partial.rename(image)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def load(self, cid: str, source: str) -> bool:
        """Swap the container's filesystem for a copy of the saved disk `source` (grown to
        the old one's size if it is smaller): a restore in place, the container kept. A
        running container's processes keep the old one (detached, freed once the engine
        stops them), so the swap can be made while the engine kills them; its next start
        is on the copy. False if the container has no filesystem of its own."""
        image, note = self._paths(cid)
        with self._locked():
            if not image.exists():
                return False
            layer = self._noted(note)
            engine = image.with_name(cid + _ENGINE)
            if not engine.exists():
                # This layer's own engine files (mounted or under the mount, the same), put
                # back over the copy's at every mount, as for a container made from one.
                files = {n: (layer / n).read_text() for n in _ENGINE_FILES}
                engine.write_text(json.dumps(files))
            self._copy_saved(source, image, image.stat().st_size)
            if self._mounted_at(note):
                run("umount", "--lazy", str(layer))
            self._mount(image, layer)
        return True

    def save(self, cid: str, key: str, running: bool = True) -> None:
        """Copy the container's disk to the saved disk `key`: of a running box, under a
        freeze of at most diskcopy.FREEZE_LIMIT seconds, so the copy is consistent."""
        image, note = self._paths(cid)
        dest = self.saved(key)
        with self._locked():
            dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not image.exists():
                raise FileNotFoundError(f"container {cid[:12]} has no disk of its own")
            mount = self._noted(note) if self._mounted_at(note) else None
        # Not under the folder's lock: a freeze may wait on the box; the disk's own lock
        # (taken by the copier) keeps its copies one at a time.
        if mount is not None and running:
            diskcopy.frozen_copy(mount, image, dest, image.with_name(cid + _LOCK))
            return
        with locked_file(image.with_name(cid + _LOCK)):
            if mount is not None:
                diskcopy.synced_copy(mount, image, dest)
            else:
                diskcopy.clone(image, dest)

    def copy_saved(self, source: str, key: str) -> None:
        dest = self.saved(key)
        with self._locked():
            dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            diskcopy.clone(self.saved(source), dest)

    def drop_saved(self, key: str) -> None:
        """Remove a saved disk; `FOLDER/*` removes the folder's all."""
        with self._locked():
            self._drop_saved(key)

    def _drop_saved(self, key: str) -> None:
        folder, _, name = key.partition("/")
        if name == "*":
            target = self.saved(folder + "/x").parent
            for path in target.glob("*" + _IMAGE + "*"):
                path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                target.rmdir()
            return
        path = self.saved(key)
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # once it is the folder's last

    def saved_keys(self) -> set[str]:
        base = self.root / SAVED / self.instance
        return {f"{p.parent.name}/{p.name.removesuffix(_IMAGE)}" for p in base.glob("*/*" + _IMAGE)}

    def saved_usage(self, key: str) -> diskcopy.Usage:
        return diskcopy.usage(self.saved(key))

    def thaw_idle(self) -> None:
        """Thaw every layer left frozen (a copier and its watchdog both killed); a layer
        being copied now is left be (its copier holds the lock)."""
        with self._locked():
            for note in self.root.glob("*" + _LAYER):
                self._thaw(note)

    def _thaw(self, note: Path) -> None:
        lock = note.with_name(note.name.removesuffix(_LAYER) + _LOCK)
        with contextlib.suppress(OSError, ValueError):
            if self._mounted_at(note) and diskcopy.try_thaw(self._noted(note), lock):
                log.warning("thawed the disk at %s, left frozen", self._noted(note))

    def ensure(self, cid: str) -> bool:
        """Mount the container's layer filesystem if it is not mounted; whether it has one."""
        image, note = self._paths(cid)
        if not image.exists():
            return False
        if self._mounted_at(note):
            self._thaw(note)  # a box left frozen would hang its start
            return True
        with self._locked():
            if image.exists() and not self._mounted_at(note):
                self._mount(image, self._noted(note))
        return True

    def size(self, cid: str) -> int | None:
        """The size of the container's layer filesystem, if it has one."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            return self._paths(cid)[0].stat().st_size
        return None

    def release(self, cid: str) -> None:
        """Drop the filesystem of a container the engine has removed."""
        image, note = self._paths(cid)
        with self._locked():
            self._release(image, note)

    def sweep(self, containers: Callable[[], Iterable[str]], min_age: float = 600.0) -> None:
        """Drop the filesystems of containers the engine no longer has (a crash between a
        removal and its release). `containers` lists every container id the engine has; it
        is called under the lock, so no filesystem can be made between the listing and
        the sweep (one made after a listing would look orphaned). A saved disk's partial
        copy goes once it is `min_age` seconds old: copies run outside this lock."""
        with self._locked():
            keep = set(containers())
            for image in self.root.glob("*" + _IMAGE):
                cid = image.name.removesuffix(_IMAGE)
                if cid not in keep and _CID.fullmatch(cid):
                    log.warning("removing the disk of container %s, which is gone", cid[:12])
                    self._release(image, image.with_name(cid + _LAYER))
            for partial in self.root.glob("*" + _IMAGE + ".new*"):
                partial.unlink(missing_ok=True)  # a crash mid-format or mid-growth
            for partial in self.root.glob(f"{SAVED}/*/*/*{_IMAGE}.new"):
                # ctime, which no one can set back: a copy in progress is never swept.
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - partial.stat().st_ctime > min_age:
                        partial.unlink(missing_ok=True)  # a crash mid-copy

    def cids(self) -> set[str]:
        return {p.name.removesuffix(_IMAGE) for p in self.root.glob("*" + _IMAGE)}

    def _noted(self, note: Path) -> Path:
        return self._layer(str(Path(note.read_text()) / "diff"))

    def _mounted_at(self, note: Path) -> bool:
        # Two stats, not a read of the host's whole mount table: every start, commit and
        # copy of a box asks.
        return os.path.ismount(self._noted(note))

    def _release(self, image: Path, note: Path) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            if self._mounted_at(note):
                run("umount", str(self._noted(note)))
        image.unlink(missing_ok=True)
        note.unlink(missing_ok=True)
        for suffix in (_ENGINE, _LOCK):
            image.with_name(image.name.removesuffix(_IMAGE) + suffix).unlink(missing_ok=True)

    @staticmethod
    def _mount(image: Path, layer: Path) -> None:
        # The folder as the engine made it (its mode lets box root through, not others);
        # mkfs gives the copy's root mode and owner of its own.
        st = layer.stat()
        # nodev: no device of the box's making opens through its own filesystem. Not
        # nosuid: a setuid program the box upgrades (sudo) lands in this layer.
        mount_image(image, layer, f"nodev,{KEEP_SPARSE}")
        os.chown(layer, st.st_uid, st.st_gid)
        os.chmod(layer, st.st_mode & 0o7777)
        with contextlib.suppress(OSError):
            (layer / "lost+found").rmdir()  # host root's, and no use to anyone
        engine = image.with_name(image.name.removesuffix(_IMAGE) + _ENGINE)
        with contextlib.suppress(FileNotFoundError):
            for name, text in json.loads(engine.read_text()).items():
                if name in _ENGINE_FILES:
                    (layer / name).write_text(text)


def _fresh(layer: Path) -> list[Folder] | None:
    """The folders of a layer the engine has just made (`diff`, `work/work`: empty, beside
    its two files), by owner and mode; None for anything else (mkfs copies that)."""
    expected = {"diff": (), "work": ("work",), "work/work": ()}
    try:
        if {p.name for p in layer.iterdir()} != {"diff", "work", *_ENGINE_FILES}:
            return None
        found = []
        for path, inside in expected.items():
            st = (layer / path).lstat()
            if (
                not stat.S_ISDIR(st.st_mode)
                or tuple(p.name for p in (layer / path).iterdir()) != inside
            ):
                return None
            found.append((path, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid))
    except OSError:
        return None
    return found


def _grow(image: Path, size: int) -> None:
    """Grow a copied layer filesystem (a fork into a larger type) before it is mounted.
    The copy was taken of a mounted filesystem: its journal is replayed first."""
    with open(image, "r+b") as handle:
        handle.truncate(size)
    _bounded(["e2fsck", "-p", "-E", "journal_only", str(image)], ok=(0, 1))  # 1: replayed
    _bounded(["resize2fs", "-f", str(image)], ok=(0,))


def _bounded(argv: list[str], ok: tuple[int, ...]) -> None:
    # Bounded in time: the filesystem's metadata is the box's making (through the kernel).
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_GROW_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{argv[0]} took over {_GROW_TIMEOUT} s") from exc
    if done.returncode not in ok:
        raise OSError(f"{argv[0]}: {(done.stderr or done.stdout).strip()}")
