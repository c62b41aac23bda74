"""Idmapped mounts and user namespaces made to order, through Linux's new mount API.

Python's `os` has neither `open_tree(2)`, `move_mount(2)` nor `mount_setattr(2)`, so they
are called by number (the same on every architecture: they came after the tables were
unified). An idmapped mount shows the files of a filesystem with their owners translated
through a user namespace's mapping, without changing a byte on disk: ext4 and XFS since
Linux 5.12, tmpfs since 6.3; overlayfs itself cannot be idmapped, but since 5.19 it can be
mounted on idmapped layers, which is how a box's root gets its own owners here.

Stdlib only: the OCI wrapper (runtime/oci.py) imports this for every box start.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_EMPTY_PATH = 0x1000
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_MNT_DETACH = 2
_MS_BIND = 4096
_MS_PRIVATE = 1 << 18
_CLONE_NEWUSER = 0x10000000
_PR_SET_SECUREBITS = 28
_SECBIT_NO_SETUID_FIXUP = 1 << 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

# (inside, outside, count): one line of a uid_map/gid_map.
Mapping = tuple[int, int, int]


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _checked(rc: int, what: str) -> int:
    if rc < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return rc


class Userns:
    """A user namespace with the given mapping, held open by a descriptor (and, until
    `release`, by the process that made it). `owner`: the host uid it belongs to, which is
    who pays for what its processes take of the per-user kernel budgets (inotify
    instances, nested namespaces, ...): the process that makes it takes that uid as its
    effective one, keeping its capabilities (SECBIT_NO_SETUID_FIXUP), so the namespace is
    made as a privileged one (no distribution's unprivileged-userns policy applies)."""

    def __init__(self, mapping: Sequence[Mapping], owner: int = 0) -> None:
        ready_r, ready_w = os.pipe()
        hold_r, hold_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child only makes the namespace and waits
            code = 1
            try:
                os.close(ready_r)
                os.close(hold_w)
                if owner:
                    _checked(
                        _libc.prctl(_PR_SET_SECUREBITS, _SECBIT_NO_SETUID_FIXUP, 0, 0, 0),
                        "prctl",
                    )
                    os.setresgid(0, owner, 0)
                    os.setresuid(0, owner, 0)
                _checked(_libc.unshare(_CLONE_NEWUSER), "unshare")
                os.write(ready_w, b"1")
                os.read(hold_r, 1)  # until the parent closes its end
                code = 0
            except BaseException:
                with contextlib.suppress(OSError):
                    os.write(ready_w, b"0")
            os._exit(code)
        os.close(ready_w)
        os.close(hold_r)
        self.pid = pid
        self._hold = hold_w
        self.fd = -1
        try:
            if os.read(ready_r, 1) != b"1":
                raise OSError(errno.EPERM, "could not make a user namespace")
            lines = "".join(f"{inside} {outside} {count}\n" for inside, outside, count in mapping)
            for name in ("uid_map", "gid_map"):
                Path(f"/proc/{pid}/{name}").write_text(lines)
            self.fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            self.release()
            raise
        finally:
            os.close(ready_r)

    @property
    def path(self) -> str:
        """A name of the namespace that runc can join while the maker lives."""
        return f"/proc/{self.pid}/ns/user"

    def release(self) -> None:
        """Let the making process end; the descriptor stays until `close`."""
        if self._hold >= 0:
            os.close(self._hold)
            self._hold = -1
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)

    def close(self) -> None:
        self.release()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Userns:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def clone_idmapped(source: str | Path, target: str | Path, userns: Userns) -> None:
    """Mount at `target` (an existing folder, or file for a file) the mount at `source`,
    without its submounts, with owners mapped through `userns`."""
    tree = _checked(
        _libc.syscall(
            _SYS_OPEN_TREE,
            _AT_FDCWD,
            os.fsencode(source),
            _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_SYMLINK_NOFOLLOW,
        ),
        f"open_tree {source}",
    )
    try:
        # Private: a clone of a shared mount would otherwise be its peer, and detaching
        # the clone later would take the original's submounts (a box's root) with it.
        attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, _MS_PRIVATE, userns.fd)
        _checked(
            _libc.syscall(
                _SYS_MOUNT_SETATTR,
                tree,
                b"",
                _AT_EMPTY_PATH,
                ctypes.byref(attr),
                ctypes.sizeof(attr),
            ),
            f"idmapping {source}",
        )
        _checked(
            _libc.syscall(
                _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, os.fsencode(target), _MOVE_MOUNT_F_EMPTY_PATH
            ),
            f"move_mount {target}",
        )
    finally:
        os.close(tree)


def mount(
    source: str, target: str | Path, fstype: str, options: str, bind: bool = False, flags: int = 0
) -> None:
    """mount(2), `options` its data and `flags` its MS_ flags; a bind is made private at once
    (see `clone_idmapped`)."""
    _checked(
        _libc.mount(
            source.encode(),
            os.fsencode(target),
            fstype.encode() or None,
            flags | (_MS_BIND if bind else 0),
            options.encode() or None,
        ),
        f"mount {fstype or 'bind'} on {target}",
    )
    if bind:
        _checked(
            _libc.mount(None, os.fsencode(target), None, _MS_PRIVATE, None),
            f"making {target} private",
        )


def unmount(target: str | Path, lazy: bool = False) -> None:
    _checked(_libc.umount2(os.fsencode(target), _MNT_DETACH if lazy else 0), f"umount {target}")


@contextlib.contextmanager
def working_dir(path: Path) -> Iterator[None]:
    """cwd set to `path` for a while: overlayfs takes layer paths relative to it, which keeps
    a root of twenty layers well inside mount(2)'s one page of options."""
    before = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chdir(path)
        yield
    finally:
        os.fchdir(before)
        os.close(before)
