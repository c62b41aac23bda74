"""A filesystem image mounted through a loop device, as `mount -o loop` mounts it, without
util-linux's look at every loop device for one already on the image: it reads each one's
backing file, and every box has two (its disk, its Docker volume), so at 500 boxes a
mount took 30 ms against 10 this way, on each create.

A free device from the kernel (LOOP_CTL_GET_FREE), the image attached to it in one call
with autoclear (LOOP_CONFIGURE: the device is freed with the mount's end, as util-linux's
are), then mount(2). Two mounts at once may be given the same free device: the second's
attach fails busy and it asks again. Where the kernel has no LOOP_CONFIGURE (before 5.8),
`mount -o loop` does it all. Nothing here refuses a second device on an image that is
mounted already, as util-linux's look did: each caller mounts an image under its own lock,
after finding it not mounted (drivefs.py, boxdisk.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import time
from pathlib import Path

from .idmount import mount

_LOOP_CTL_GET_FREE = 0x4C82
_LOOP_CONFIGURE = 0x4C0A
_LOOP_CLR_FD = 0x4C01
_LO_FLAGS_AUTOCLEAR = 4
_LO_FLAGS_DIRECT_IO = 16
# Direct I/O from the device to its image: the image's blocks are cached once, by the
# filesystem in it, not again by each one under it (an ext4 of a box's on the engine's
# XFS in a file on the host's ext4 had each byte it wrote cached three times). Direct
# I/O needs the device's blocks as large as the image's file takes by it: the filesystem
# in the image says how large its blocks are, and the kernel keeps to the page cache
# where the file takes larger ones (a reflinked file on XFS takes 4096 bytes).
_EXT4_MAGIC = 0xEF53
# struct loop_config: fd, block_size, struct loop_info64, 8 reserved u64.
_CONFIG = struct.Struct("=II5Q4I64s64s32s2Q8Q")
# mount(8)'s option words that are mount(2) flags; the rest go to the filesystem.
_FLAGS = {"ro": 1, "nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024}
_TRIES = 20


def mount_image(image: Path, target: Path, options: str, fstype: str = "ext4") -> None:
    """Mount the filesystem in `image` at `target` with mount(8)'s `options` (no `loop`)."""
    flags, data = _split(options)
    fd = os.open(image, (os.O_RDONLY if flags & _FLAGS["ro"] else os.O_RDWR) | os.O_CLOEXEC)
    missing = ""
    try:
        block = _block_size(fd, fstype)
        for _ in range(_TRIES):
            number = _free()
            device = f"/dev/loop{number}"
            try:
                dev = os.open(device, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:  # just made: its node comes a moment later
                missing = device
                time.sleep(0.002)
                continue
            try:
                try:
                    fcntl.ioctl(dev, _LOOP_CONFIGURE, _config(fd, image, block))
                except OSError as exc:
                    if exc.errno == errno.EBUSY:  # taken by another mount meanwhile
                        continue
                    if exc.errno in (errno.EINVAL, errno.ENOTTY):  # no LOOP_CONFIGURE
                        _mount_by_util_linux(image, target, options)
                        return
                    raise
                try:
                    mount(device, target, fstype, data, flags=flags)
                except BaseException:
                    with contextlib.suppress(OSError):
                        fcntl.ioctl(dev, _LOOP_CLR_FD)
                    raise
                return
            finally:
                os.close(dev)  # the mount holds the device from here on
        if missing:  # a /dev that makes no nodes (inside a container, say)
            raise OSError(errno.ENODEV, f"{missing} did not appear in /dev for {image}")
        raise OSError(errno.EBUSY, f"no free loop device for {image} after {_TRIES} tries")
    finally:
        os.close(fd)


def _split(options: str) -> tuple[int, str]:
    flags, data = 0, []
    for word in filter(None, options.split(",")):
        if word in _FLAGS:
            flags |= _FLAGS[word]
        else:
            data.append(word)
    return flags, ",".join(data)


def _free() -> int:
    ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        return fcntl.ioctl(ctl, _LOOP_CTL_GET_FREE)
    finally:
        os.close(ctl)


def _block_size(fd: int, fstype: str) -> int:
    """The smallest block the filesystem in the image writes (ext4's block, XFS's sector:
    512 to 4096 bytes); 0 where it is not known."""
    head = os.pread(fd, 2048, 0)
    size = 0
    if fstype == "ext4" and int.from_bytes(head[1080:1082], "little") == _EXT4_MAGIC:
        shift = int.from_bytes(head[1048:1052], "little")
        size = 1024 << shift if shift <= 6 else 0
    elif fstype == "xfs" and head[:4] == b"XFSB":
        size = int.from_bytes(head[102:104], "big")
    return size if size in (512, 1024, 2048, 4096) else 0


def _config(fd: int, image: Path, block: int) -> bytes:
    # loop_info64: device, inode, rdevice, offset, sizelimit; number, encryption type and
    # key size, flags; the file's name (what `losetup -a` shows), crypt name, key, init.
    flags = _LO_FLAGS_AUTOCLEAR | (_LO_FLAGS_DIRECT_IO if block else 0)
    info = (0, 0, 0, 0, 0, 0, 0, 0, flags, os.fsencode(image)[:63], b"", b"", 0, 0)
    return _CONFIG.pack(fd, block, *info, *(0,) * 8)


def _mount_by_util_linux(image: Path, target: Path, options: str) -> None:
    from .drivefs import run  # drivefs mounts through this module

    run("mount", "-o", f"loop,{options}", str(image), str(target))
