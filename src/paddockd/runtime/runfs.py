"""A box's run folder (its /run/paddock, where the desktop's VNC socket appears) as a
tiny tmpfs of its own on the host.

The folder is the box's to write, and it lives under /var/lib/paddock, on the host's
filesystem with paddockd's database: as a plain folder a box could fill that disk through
it. A tmpfs of 1 MiB holds the sockets it is for and nothing more (its pages are charged
to the box's memory limit), and it is empty at every boot, as /run is.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .drivefs import run

_OPTIONS = "size=1m,nr_inodes=256,mode=0755,nosuid,nodev,noexec"


def ensure(folder: Path, owner: int) -> None:
    """Make `folder` a fresh tmpfs owned by `owner` (a host uid), unless it is one now."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(folder):
        return
    run("mount", "-t", "tmpfs", "-o", f"{_OPTIONS},uid={owner},gid={owner}", "tmpfs", str(folder))
    os.chown(folder, owner, owner)


def release(folder: Path) -> None:
    """Unmount it (the folder itself goes with the box's)."""
    with contextlib.suppress(OSError):
        if os.path.ismount(folder):
            run("umount", str(folder))
