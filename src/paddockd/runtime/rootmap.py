"""A box's root and binds, shown to the box with its own identity (runtime/identity.py).

On disk every file keeps the engine's owners (box root = the remap's base, 200000): the
engine's commits, archives of stopped boxes and the image layers shared by every box stay
as they are. What changes is the running box's view. Just before runc creates the box:
- the engine's layer folder (every image layer) and the box's own layer are mounted
  again, idmapped: on-disk owner `canonical + N` shows as `base + N`, the box's own range;
  on-disk 0 stays 0, for the whiteouts and work files overlayfs makes as its mounter;
- the engine's overlay of the box's root is replaced, at the same place, by one made of
  those idmapped layers, so the box's root and the engine's view of it are one mount
  (two overlays over one upper folder would each cache what the other changed);
- the box's binds that hold its own data (its Docker volume, drives, run folder) are
  idmapped the same way, and its /etc/hostname, /etc/hosts and /etc/resolv.conf, which the
  engine keeps on its own filesystem, where a box could write gigabytes into them, come
  from copies on the box's own disk instead.
The staging mounts are detached once runc has its copies: overlayfs holds its layers by
private clones, and the box's mount namespace holds its binds.

Paths come from the engine's own spec (config.json) and are checked to lie where the
engine keeps such things; nothing a box names is followed. Stdlib only (the OCI wrapper).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .idmount import Userns, clone_idmapped, mount, unmount, working_dir

RANGE = 65536
# The engine's files of a container that it binds into the box, by their place in it.
ETC_FILES = {"/etc/hostname": "hostname", "/etc/hosts": "hosts", "/etc/resolv.conf": "resolv.conf"}
# Where a box with a disk of its own keeps its copies of them, in its layer folder.
ETC_FOLDER = "etc"
_LAYER = re.compile(r"[0-9a-f]{64}")
# Access-time flags of a bind are the source mount's: from inside the box's user
# namespace runc may not change them on a mount made outside it (the kernel locks them).
_ATIME = {"noatime", "relatime", "strictatime", "nodiratime"}
_LOWER = re.compile(r"l/[A-Z0-9]{26}")


class Staged:
    """Mounts made for runc to take, to be detached once it has."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.mounts: list[Path] = []

    def detach(self) -> None:
        """Detach the staged mounts (the box's root stays, for runc)."""
        for target in reversed(self.mounts):
            with contextlib.suppress(OSError):
                unmount(target, lazy=True)
            with contextlib.suppress(OSError):
                target.rmdir() if target.is_dir() else target.unlink()
        self.mounts.clear()


def release(staging: Path) -> None:
    """After runc deleted the box: its root's mount and the staging folder go."""
    if not staging.is_dir():
        return
    for entry in sorted(staging.iterdir()):
        with contextlib.suppress(OSError):
            unmount(entry, lazy=True)
    import shutil  # a removal's alone: a box start need not import it

    shutil.rmtree(staging, ignore_errors=True)


def etc_copy(layer: Path, name: str) -> Path:
    """Where a box with its own disk has its copy of the engine's `name` (hosts, ...)."""
    return layer / ETC_FOLDER / name


def box_layer(root: Path, layers: Path | None = None) -> Path:
    """The layer folder of a box's root (`overlay2/<id>/merged`), checked to be one."""
    layer = root.parent
    if (
        root.name != "merged"
        or not _LAYER.fullmatch(layer.name)
        or (layers is not None and layer.parent != layers)
        or layer.is_symlink()
        or not (layer / "lower").is_file()
    ):
        raise ValueError(f"not a box root of the engine's: {root}")
    return layer


def _lowers(layer: Path) -> list[str]:
    names = (layer / "lower").read_text().strip().split(":")
    if not names or not all(_LOWER.fullmatch(n) for n in names):
        raise ValueError(f"the engine's list of layers of {layer.name} is not one")
    return names


def _own(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def idmap_box(
    spec: dict[str, Any], base: int, canonical: int, staging: Path, data: Iterable[Path]
) -> Staged:
    """Rewrite `spec` (runc's config, already mapped onto `base`) and mount what it now
    names. `canonical`: the engine's box root uid; `data`: folders whose binds hold box
    data even when read-only (the engine's data root: volumes, its files of the box);
    every writable bind is the box's too. Raises OSError/ValueError, leaving nothing
    staged (the engine's own mount of the root may be gone: its next start makes it)."""
    root = Path(spec["root"]["path"])
    layer = box_layer(root)
    overlay2 = layer.parent
    lowers = _lowers(layer)
    data = tuple(data)
    staged = Staged(staging)
    # runc binds the root and these mounts from inside the box's user namespace, as the
    # box's root: every folder on the way must let it pass (not list).
    release(staging)  # a crashed start's, should there be one
    staging.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    staging.mkdir(mode=0o711)
    try:
        with Userns([(0, 0, 1), (canonical, base, RANGE)]) as view:
            view.release()
            lower = staging / "lower"
            lower.mkdir()
            clone_idmapped(overlay2, lower, view)
            staged.mounts.append(lower)
            own_disk = os.path.ismount(layer)
            if own_disk:
                upper = staging / "upper"
                upper.mkdir()
                clone_idmapped(layer, upper, view)
                staged.mounts.append(upper)
                upper_rel = "upper"
            else:
                upper_rel = f"lower/{layer.name}"
            for m in spec.get("mounts", []):
                if m.get("type") != "bind" and "bind" not in m.get("options", ()):
                    continue
                source = Path(str(m.get("source", "")))
                name = ETC_FILES.get(str(m.get("destination")))
                if "ro" in m.get("options", ()) and not _own(source, data):
                    continue  # LXCFS's views and the like: the host's, read-only
                m["options"] = [o for o in m.get("options", []) if o not in _ATIME]
                if name and own_disk and source.parent.parent.name == "containers":
                    _copy_file(source, etc_copy(layer, name))
                    m["source"] = str(staging / upper_rel / ETC_FOLDER / name)
                else:
                    target = staging / f"bind{len(staged.mounts)}"
                    if source.is_dir():
                        target.mkdir()
                    else:
                        target.touch()
                    clone_idmapped(source, target, view)
                    staged.mounts.append(target)
                    m["source"] = str(target)
            _replace_root(root, staging, [f"lower/{n}" for n in lowers], upper_rel)
            # The engine's place of the root is in folders only the engine's range may
            # pass; runc takes it from here, the same mount. runc keeps the path and
            # starts every exec in it, so it stays until the box is deleted (`release`).
            view_root = staging / "root"
            view_root.mkdir()
            mount(str(root), view_root, "", "", bind=True)
            spec["root"]["path"] = str(view_root)
    except BaseException:
        staged.detach()
        release(staging)
        raise
    return staged


def _copy_file(source: Path, copy: Path) -> None:
    """`source`'s bytes, owner and mode as `copy`. An existing copy is rewritten in place,
    written before it is cut to length, so it keeps the blocks it has: a box that filled
    its disk still starts (a copy made afresh would need new blocks there)."""
    copy.parent.mkdir(mode=0o755, exist_ok=True)
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    try:
        out = os.open(copy, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        tmp = copy.with_name(copy.name + ".new")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        os.close(out)
        os.replace(tmp, copy)
        out = os.open(copy, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.pwrite(out, data, 0)
        os.ftruncate(out, len(data))
        os.fchown(out, info.st_uid, info.st_gid)
        os.fchmod(out, info.st_mode & 0o7777)
    finally:
        os.close(out)


def _replace_root(root: Path, staging: Path, lowers: list[str], upper: str) -> None:
    try:
        unmount(root)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            pass  # not mounted (an earlier try got this far)
        elif exc.errno == errno.EBUSY:
            unmount(root, lazy=True)  # a copy out of the stopped box is still reading it
        else:
            raise
    options = f"lowerdir={':'.join(lowers)},upperdir={upper}/diff,workdir={upper}/work"
    with working_dir(staging):
        mount("overlay", root, "overlay", options)
