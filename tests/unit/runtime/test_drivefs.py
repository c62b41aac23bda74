"""Sized volumes' filesystems a crash left without their engine volume are swept; ones
being made (the filesystem comes before the engine's volume) and kept ones stay."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from paddockd.runtime import diskcopy, drivefs
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


# -- new filesystems, copied from a blank one formatted once -----------------------------
ENGINE_FS = Path("/var/lib/paddock/engine")
FOLDERS = [
    ("diff", 0o755, 200000, 200000),
    ("work", 0o700, 200000, 200000),
    ("work/work", 0, 200000, 200000),
]
needs_root_and_mkfs = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or shutil.which("debugfs") is None,
    reason="needs root (owners), mkfs.ext4 and debugfs",
)


def _listing(image: Path, folder: str) -> str:
    return subprocess.run(
        ["debugfs", "-R", f"ls -l {folder}", str(image)], capture_output=True, text=True, check=True
    ).stdout


def _stat(image: Path, path: str) -> tuple[int, int, int]:
    out = subprocess.run(
        ["debugfs", "-R", f"stat {path}", str(image)], capture_output=True, text=True, check=True
    ).stdout
    mode = int(re.search(r"Mode:\s+(\d+)", out).group(1), 8)  # type: ignore[union-attr]
    uid = int(re.search(r"User:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    gid = int(re.search(r"Group:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    return mode, uid, gid


def _made(calls: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real = drivefs.make_ext4

    def counted(image: Path, *args: object, **kwargs: object) -> None:
        calls.append(image)
        real(image, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(drivefs, "make_ext4", counted)


@needs_root_and_mkfs
@pytest.mark.skipif(not ENGINE_FS.is_dir(), reason="no engine filesystem (XFS, reflinks) here")
def test_new_filesystems_are_copies_of_one_formatted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(tempfile.mkdtemp(prefix="pdunit-blank-", dir=ENGINE_FS))
    calls: list[Path] = []
    _made(calls, monkeypatch)
    try:
        first, second = folder / "a.ext4", folder / "b.ext4"
        drivefs.new_ext4(first, 64 << 20, folders=FOLDERS, features=("inline_data",))
        drivefs.new_ext4(second, 64 << 20, folders=FOLDERS, features=("inline_data",))
        assert calls == [first] and len(list((folder / drivefs.BLANKS).glob("*.ext4"))) == 1
        for image in (first, second):
            assert image.stat().st_size == 64 << 20 and image.stat().st_mode & 0o777 == 0o600
            assert _stat(image, "/diff") == (0o755, 200000, 200000)
            assert _stat(image, "/work/work") == (0, 200000, 200000)
        # Each is its own: a change to one is not in the other, nor in the blank.
        subprocess.run(
            ["debugfs", "-w", "-R", "mkdir /only-a", str(first)], check=True, capture_output=True
        )
        assert "only-a" in _listing(first, "/") and "only-a" not in _listing(second, "/")
        # Another size, owner or set of folders is another blank.
        drivefs.new_ext4(folder / "c.ext4", 64 << 20, owner=201000)
        assert len(calls) == 2
        assert _stat(folder / "c.ext4", "/")[1:] == (201000, 201000)
        assert not list(folder.glob("*.new")) and not list((folder / drivefs.BLANKS).glob("*.new"))
    finally:
        shutil.rmtree(folder)


@needs_root_and_mkfs
def test_without_copies_a_new_filesystem_is_formatted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_copies(source: Path, dest: Path, durable: bool = True) -> None:
        raise diskcopy.CopyFailed(95, f"{source}: no copy-on-write copies here")

    monkeypatch.setattr(diskcopy, "clone", no_copies)
    image = tmp_path / "a.ext4"
    drivefs.new_ext4(image, 64 << 20, folders=FOLDERS)
    assert _stat(image, "/work") == (0o700, 200000, 200000)
    assert not [p for p in tmp_path.iterdir() if p.name not in ("a.ext4", drivefs.BLANKS)]
