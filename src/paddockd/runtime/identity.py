"""Each running box's own identity on the host: a range of 65536 host uids and gids.

The engine's `--userns-remap` maps every box onto one range (200000+), and the kernel
keeps many budgets per host uid: keys and keyrings, inotify instances and watches,
nested namespaces, processes, pending signals, message queues, locked memory, epoll
watches, pipe buffers. With one range, one box could spend them for all. So each box
start takes a slot of its own from a region of the uid space nothing else uses
(0x70000000 up: above systemd's container range, below its foreign range), and the box
runs mapped onto it (runtime/oci.py). Files keep the engine's owners on disk: only the
kernel's view of the running box changes, through idmapped mounts.

Slots are files named by number in a folder on /run (gone at reboot, with every box),
each holding the container id it was taken for. A slot is in use while its file is
locked (its box is being created) or runc knows its container; anything else is left
over from a crash and taken again. The OCI wrapper's delete removes the file of a
container runc has forgotten, under the folder's lock (oci.py, `_DELETE`). Stdlib only
(the OCI wrapper imports it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

FIRST_UID = 0x70000000
RANGE = 65536
SLOTS = 4000
DEFAULT_DIR = Path("/run/paddock/identities")
_CID = re.compile(r"[0-9a-zA-Z][0-9a-zA-Z_.-]{0,127}")


class NoIdentity(OSError):
    """Every slot is in use."""


class Identities(NamedTuple):
    """`folder`: where the slots are kept. `runc_root`: runc's state folder, which knows
    every container it has not deleted."""

    folder: Path = DEFAULT_DIR
    runc_root: Path | None = None
    first: int = FIRST_UID
    slots: int = SLOTS

    def base(self, slot: int) -> int:
        return self.first + slot * RANGE

    def slot_of(self, uid: int) -> int | None:
        """The slot a host uid belongs to, if it is one of this region's."""
        slot, _ = divmod(uid - self.first, RANGE)
        return slot if uid >= self.first and slot < self.slots else None

    @contextlib.contextmanager
    def take(self, cid: str) -> Iterator[int]:
        """A slot for container `cid`, held locked while the caller creates it; its first
        host uid is yielded. The slot stays taken afterwards, until runc forgets the container."""
        if not _CID.fullmatch(cid):
            raise ValueError(f"not a container id: {cid!r}")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._listing():
            slot, fd = self._claim(cid)
        try:
            yield self.base(slot)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / str(slot))
            raise
        finally:
            os.close(fd)  # the lock goes; runc knows the container from here on

    def of(self, cid: str) -> int | None:
        """The first host uid of the container's identity, while it has one."""
        for slot, owner in self._taken():
            if owner == cid:
                return self.base(slot)
        return None

    @contextlib.contextmanager
    def _listing(self) -> Iterator[None]:
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _taken(self) -> Iterator[tuple[int, str]]:
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return
        for name in names:
            if not name.isdigit():
                continue
            try:
                owner = (self.folder / name).read_text().strip()
            except OSError:
                continue
            yield int(name), owner

    def _claim(self, cid: str) -> tuple[int, int]:
        used: set[int] = set()
        for slot, owner in self._taken():
            if owner != cid and self._alive(slot, owner):
                used.add(slot)
            else:  # a crash's leftover, or this container's own from before
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.folder / str(slot))
        for slot in range(self.slots):
            if slot in used:
                continue
            path = self.folder / str(slot)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, cid.encode())
            return slot, fd
        raise NoIdentity(f"all {self.slots} box identities are in use")

    def _alive(self, slot: int, cid: str) -> bool:
        try:
            fd = os.open(self.folder / str(slot), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # its box is being created right now
        finally:
            os.close(fd)
        return self.runc_root is None or (self.runc_root / cid / "state.json").exists()
