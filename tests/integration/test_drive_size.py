"""Drives with a size, on the real engine: a full drive is ENOSPC inside the box and
nothing else notices; its use and size show in `drive ls`; removing it removes its
filesystem; a drive still mounts after its filesystem was unmounted (a reboot)."""

from __future__ import annotations

import json
import subprocess
import uuid

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
