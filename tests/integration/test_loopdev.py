"""Filesystem images mounted through loop devices by paddockd itself (runtime/loopdev.py),
on the real kernel: options as mount(8) gives them, the device freed with the mount, no
device left behind by a mount that fails, and mounts at once each on a device of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from paddockd.runtime.loopdev import mount_image

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/dev/loop-control").exists(), reason="needs root and loops"
)
OPTIONS = "nodev,nosuid,noatime,discard,errors=remount-ro"


def ext4(path: Path) -> Path:
    subprocess.run(["truncate", "-s", "32M", str(path)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(path)], check=True)
    return path


def attached(image: Path) -> str:
    return subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout


def mount_line(point: Path) -> list[str]:
    lines = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    return next(line for line in lines if line[1] == str(point))


def test_an_image_is_mounted_with_its_options_and_its_device_goes_with_the_mount(
    tmp_path: Path,
) -> None:
    image, point = ext4(tmp_path / "disk.ext4"), tmp_path / "mnt"
    point.mkdir()
    mount_image(image, point, OPTIONS)
    try:
        device, _, fstype, options, *_ = mount_line(point)
        assert device.startswith("/dev/loop") and fstype == "ext4"
        assert {"rw", "nodev", "nosuid", "noatime", "discard", "errors=remount-ro"} <= set(
            options.split(",")
        )
        (point / "f").write_text("kept")
        assert attached(image)
    finally:
        subprocess.run(["umount", str(point)], check=True)
    assert attached(image) == ""  # autoclear, as mount -o loop's devices
    mount_image(image, point, OPTIONS)  # the same image again, on a free device
    try:
        assert (point / "f").read_text() == "kept"
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_a_mount_that_fails_leaves_no_device(tmp_path: Path) -> None:
    image, point = tmp_path / "zeros.img", tmp_path / "mnt"
    subprocess.run(["truncate", "-s", "8M", str(image)], check=True)
    point.mkdir()
    with pytest.raises(OSError, match="mount"):
        mount_image(image, point, OPTIONS)
    assert attached(image) == "" and not os.path.ismount(point)


def test_mounts_at_once_each_get_a_device_of_their_own(tmp_path: Path) -> None:
    images = [ext4(tmp_path / f"d{i}.ext4") for i in range(8)]
    points = [tmp_path / f"m{i}" for i in range(8)]
    for point in points:
        point.mkdir()
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: mount_image(images[i], points[i], OPTIONS), range(8)))
        devices = {mount_line(point)[0] for point in points}
        assert len(devices) == 8
    finally:
        for point in points:
            subprocess.run(["umount", str(point)], capture_output=True)
    assert all(attached(image) == "" for image in images)


def cached_bytes(image: Path) -> int:
    """How much of `image`'s file the page cache holds."""
    out = subprocess.run(
        ["fincore", "-b", "-n", "-o", "RES", str(image)], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[0])


def loop_of(point: Path) -> tuple[str, str]:
    """(direct I/O, logical block size) of the device mounted at `point`."""
    name = mount_line(point)[0].removeprefix("/dev/")
    queue = Path(f"/sys/block/{name}")
    return (queue / "loop/dio").read_text().strip(), (
        queue / "queue/logical_block_size"
    ).read_text().strip()


@pytest.mark.parametrize(
    ("fstype", "mkfs", "block"),
    [
        ("ext4", ["mkfs.ext4", "-q", "-F", "-b", "4096"], "4096"),
        ("ext4", ["mkfs.ext4", "-q", "-F", "-b", "1024"], "1024"),
        ("xfs", ["mkfs.xfs", "-q", "-f", "-s", "size=512"], "512"),
    ],
)
def test_what_is_written_is_cached_once_not_again_as_the_image(
    tmp_path: Path, fstype: str, mkfs: list[str], block: str
) -> None:
    # Each filesystem in an image of another's was cached at both levels (three, for a
    # box's disk in the engine's XFS in a file on the host's ext4): direct I/O, by blocks
    # of the inner filesystem's size, keeps one.
    if fstype == "xfs" and not shutil.which("mkfs.xfs"):
        pytest.skip("no mkfs.xfs")
    image, point = tmp_path / f"disk.{fstype}", tmp_path / "mnt"
    subprocess.run(["truncate", "-s", "320M", str(image)], check=True)
    subprocess.run([*mkfs, str(image)], check=True)
    point.mkdir()
    mount_image(image, point, "nodev", fstype=fstype)
    try:
        assert loop_of(point) == ("1", block)
        data = os.urandom(1 << 20)
        with (point / "f").open("wb") as f:
            for _ in range(32):
                f.write(data)
            os.fsync(f.fileno())
        assert cached_bytes(image) < 4 << 20  # 32 MiB written: cached in the mount alone
        assert (point / "f").read_bytes()[: 1 << 20] == data
    finally:
        subprocess.run(["umount", str(point)], check=True)
    mount_image(image, point, "nodev", fstype=fstype)  # and read back from the image
    try:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
        assert (point / "f").read_bytes()[-(1 << 20) :] == data
    finally:
        subprocess.run(["umount", str(point)], check=True)
