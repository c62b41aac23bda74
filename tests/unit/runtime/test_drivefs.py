"""Sized volumes' filesystems a crash left without their engine volume are swept; ones
being made (the filesystem comes before the engine's volume) and kept ones stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

from paddockd.runtime.drivefs import DriveFs


def _image(root: Path, volume: str, age: float) -> Path:
    image = root / f"{volume}.ext4"
    image.write_bytes(b"")
    (root / f"{volume}.mnt").mkdir()
    then = time.time() - age
    os.utime(image, (then, then))
    return image


def test_only_old_filesystems_of_gone_volumes_are_swept(tmp_path: Path) -> None:
    drives = DriveFs(tmp_path / "drives")
    drives.root.mkdir()
    gone = _image(drives.root, "paddock-box-aaa-docker", age=3600)
    kept = _image(drives.root, "paddock-drive-data", age=3600)
    young = _image(drives.root, "paddock-box-bbb-docker", age=5)
    assert drives.sweep(["paddock-drive-data"]) == ["paddock-box-aaa-docker"]
    assert not gone.exists() and not (drives.root / "paddock-box-aaa-docker.mnt").exists()
    assert kept.exists() and young.exists()


def test_no_folder_no_sweep(tmp_path: Path) -> None:
    assert DriveFs(tmp_path / "none").sweep([]) == []
    assert not (tmp_path / "none").exists()
