"""Drives with a size, on the real engine: a full drive is ENOSPC inside the box and
nothing else notices; its use and size show in `drive ls`; removing it removes its
filesystem; a drive still mounts after its filesystem was unmounted (a reboot)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from paddockd.runtime.drivefs import DriveFs

from ..harness import DRIVES, Server


def test_a_full_drive_is_no_space_in_the_box_and_nowhere_else(server: Server) -> None:
    drive, box = f"sz{uuid.uuid4().hex[:6]}", f"sz-{uuid.uuid4().hex[:6]}"
    volume = f"paddock-drive-{drive}"
    server.cli("drive", "create", drive, "--size", "64m", check=True)
    try:
        server.cli("new", "--name", box, "--ttl", "600", "--drive", drive, check=True)
        try:
            # The box user writes its own drive; 100 MiB does not fit in 64.
            done = server.cli(
                "exec", box, "--", "sh", "-c",
                f"touch /mnt/{drive}/mine && dd if=/dev/zero of=/mnt/{drive}/big bs=1M "
                "count=100 2>&1; echo exit=$?",
            )  # fmt: skip
            assert "No space left on device" in done.stdout, done.stdout
            assert "exit=1" in done.stdout
            df = server.sh(box, f"df -m --output=size /mnt/{drive} | tail -1")
            assert 50 <= int(df) <= 64, df
            listed = json.loads(server.cli("drive", "ls", "--json", check=True).stdout)
            mine = next(d for d in listed if d["name"] == drive)
            assert mine["capacity_mb"] == 64
            assert mine["size_bytes"] > 50 << 20  # what dd got in before the end
            assert "MiB of 64 MiB" in server.cli("drive", "ls", check=True).stdout

            # As after a reboot: the drive's filesystem is not mounted; a box starting
            # must still get it, not the empty folder under it.
            server.cli("stop", box, check=True)
            subprocess.run(["umount", str(DRIVES.root / f"{volume}.mnt")], check=True)
            server.cli("resume", box, check=True)
            assert server.sh(box, f"ls /mnt/{drive}") == "big\nmine\n"
        finally:
            server.cli("rm", "--force", box, check=True)
        server.cli("drive", "rm", drive, check=True)
        assert not (DRIVES.root / f"{volume}.ext4").exists()
        assert not (DRIVES.root / f"{volume}.mnt").exists()
    finally:
        server.cli("rm", "--force", box)
        server.cli("drive", "rm", drive)
        DRIVES.remove(volume)


def test_a_size_out_of_range_is_refused_with_the_range(server: Server) -> None:
    done = server.cli("drive", "create", f"sz{uuid.uuid4().hex[:6]}", "--size", "1m")
    assert done.returncode == 1
    assert "64 MiB to 16 TiB, not 1 MiB" in done.stderr
    bad = server.cli("drive", "create", "x1", "--size", "lots")
    assert bad.returncode == 2 and "is not a size like 20g" in bad.stderr


def _mounts_under(root: Path) -> list[str]:
    with open("/proc/self/mountinfo") as table:
        points = [line.split()[4] for line in table]
    return [p for p in points if p.startswith(str(root) + "/")]


def _loops_under(root: Path) -> list[str]:
    listed = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in listed.splitlines() if str(root) + "/" in line]


def _unmount_all(root: Path) -> None:
    for point in reversed(_mounts_under(root)):
        subprocess.run(["umount", "-l", point], capture_output=True)
    for loop in _loops_under(root):
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def test_drives_made_and_removed_while_boxes_start_are_mounted_once(tmp_path: Path) -> None:
    """Every box start mounts its drives not mounted (`mount`) while a member makes and
    removes sized drives: before the lock, a start could mount an image being made (two
    mounts, or two loop devices writing one ext4) or one being removed (its deleted image
    left mounted, a loop device held for good, the removal failing)."""
    drives = DriveFs(tmp_path / "drives")
    volume = "paddock-drive-race"
    stop = threading.Event()

    def boxes_starting() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                drives.mount([volume])

    starter = threading.Thread(target=boxes_starting, daemon=True)
    starter.start()
    try:
        for _ in range(6):
            point = drives.create(volume, 64 << 20)
            assert _mounts_under(drives.root) == [point]
            assert len(_loops_under(drives.root)) == 1
            drives.remove(volume)
            stop.set()  # a start may have mounted it again in between: no more now
            starter.join(10)
            assert _mounts_under(drives.root) == []
            assert _loops_under(drives.root) == []
            assert [p.name for p in drives.root.iterdir() if p.name != ".lock"] == []
            stop.clear()
            starter = threading.Thread(target=boxes_starting, daemon=True)
            starter.start()
    finally:
        stop.set()
        starter.join(10)
        _unmount_all(drives.root)


def test_a_drive_that_will_not_mount_stops_only_its_own_boxes(tmp_path: Path) -> None:
    """After a reboot, every start mounts its own drives; one drive that cannot be (loop
    devices exhausted, a damaged image) must not keep every other box from starting."""
    drives = DriveFs(tmp_path / "drives")
    try:
        drives.create("paddock-drive-good", 64 << 20)
        drives.create("paddock-drive-bad", 64 << 20)
        for point in _mounts_under(drives.root):
            subprocess.run(["umount", point], check=True)  # the reboot
        (drives.root / "paddock-drive-bad.ext4").write_bytes(b"\0" * (1 << 20))  # damaged
        drives.mount(["paddock-drive-good"])  # a box of the good drive starts
        assert _mounts_under(drives.root) == [drives.mountpoint("paddock-drive-good")]
        with pytest.raises(OSError):
            drives.mount(["paddock-drive-bad"])  # its own box: that one fails
    finally:
        _unmount_all(drives.root)


def test_a_large_drive_costs_the_engine_disk_only_what_it_holds(server: Server) -> None:
    """A member's `drive create --size 1t` must not write a gigabyte of the engine's disk
    before a byte is stored: mke2fs zeroed the whole journal (1 GiB for 128 GiB and up),
    so a few dozen API calls filled the disk every box shares."""
    drive = f"sz{uuid.uuid4().hex[:6]}"
    volume = f"paddock-drive-{drive}"
    try:
        server.cli("drive", "create", drive, "--size", "1t", check=True)
        allocated = (DRIVES.root / f"{volume}.ext4").stat().st_blocks * 512
        assert allocated < 128 << 20, f"{allocated >> 20} MiB written for an empty drive"
    finally:
        server.cli("drive", "rm", drive)
        DRIVES.remove(volume)
