"""Filesystem images mounted through loop devices by paddockd itself (runtime/loopdev.py),
on the real kernel: options as mount(8) gives them, the device freed with the mount, no
device left behind by a mount that fails, and mounts at once each on a device of its own."""

from __future__ import annotations

import os
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
