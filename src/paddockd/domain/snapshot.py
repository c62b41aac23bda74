"""Snapshots of a box's filesystem, and named drives."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from .box import Box
from .errors import InvalidRequest

DRIVE_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")  # whole names only (fullmatch)
# stop: automatic, at a stop; live: `paddock snapshot`; fork: taken for a fork
SnapshotKind = Literal["stop", "live", "fork"]


@dataclass(frozen=True)
class Snapshot:
    box_id: str
    seq: int
    image: str
    kind: SnapshotKind
    created_at: datetime
    size: int = 0
    label: str | None = None
    # A copy of the box's disk (a saved disk's name, runtime/base.py); `image` is then the
    # image its container is made from. None: `image` is an engine commit of the box.
    disk: str | None = None

    @property
    def automatic(self) -> bool:
        return self.kind == "stop"

    def holds(self, box: Box) -> bool:
        """Whether this is what the box's container is (re)made from."""
        if self.disk is not None:
            return self.disk == box.current_disk
        return box.current_disk is None and self.image == box.current_snapshot

    def matches(self, ref: str) -> bool:
        return ref == str(self.seq) or (self.label is not None and ref == self.label)


def validate_label(label: str) -> str:
    if not label or len(label) > 64 or not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", label):
        raise InvalidRequest(
            f"invalid snapshot label {label!r}: 1-64 letters, digits, '.', '_' or '-'"
        )
    if label.isdigit():
        raise InvalidRequest("a snapshot label cannot be only digits (those are snapshot ids)")
    return label


def parse_drive(spec: str) -> tuple[str, bool]:
    """`name`, `name:ro` or with a mount path `name@/path[:ro]` -> (name, read_only)."""
    name, read_only, _ = drive_mount(spec)
    return name, read_only


def drive_mount(spec: str) -> tuple[str, bool, str]:
    """(name, read_only, where it is mounted in the box): `/mnt/NAME` unless `@PATH`."""
    base, mode = spec, ""
    if spec.endswith((":ro", ":rw")):
        base, mode = spec[:-3], spec[-2:]
    elif ":" in spec.partition("@")[0]:
        raise InvalidRequest(f"invalid drive mode in {spec!r}: use NAME, NAME:ro or NAME@/PATH")
    name, at, path = base.partition("@")
    name = validate_drive_name(name)
    return name, mode == "ro", check_mount_path(path) if at else f"/mnt/{name}"


# Where a drive may not be mounted: the box's own system, its Docker, the kernel's files.
_SYSTEM = (
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/var/lib/docker",
    "/var/run",
)


def check_mount_path(path: str) -> str:
    if (
        not path.startswith("/")
        or len(path) > 255
        or path != path.rstrip("/")
        or any(part in ("", ".", "..") for part in path.split("/")[1:])
        or not all(c.isprintable() and c not in ":, " for c in path)
    ):
        raise InvalidRequest(
            f"invalid mount path {path!r}: an absolute folder path such as /data or "
            "/home/user/data (no '..', ':', ',' or spaces)"
        )
    if any(path == s or path.startswith(s + "/") for s in _SYSTEM):
        raise InvalidRequest(
            f"a drive cannot be mounted at {path}: that is the box's own system "
            "(use a folder such as /data, /workspace or /mnt/NAME)"
        )
    return path


def validate_drive_name(name: str) -> str:
    if not DRIVE_RE.fullmatch(name) or ".." in name:
        raise InvalidRequest(
            f"invalid drive name {name!r}: 1-63 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no '/' or '..')"
        )
    return name
