"""The engine's disk running out, for real: a small XFS filesystem in a loop file stands in
for the engine's data root of a test server, is filled to just under the threshold, and
new boxes, forks and snapshots are refused with the numbers while what runs carries on."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import StorageLow

from ..harness import Server

pytestmark = pytest.mark.skipif(shutil.which("mkfs.xfs") is None, reason="needs xfsprogs")

MIN_FREE_MB = 200


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    image, mount = tmp_path / "disk.xfs", tmp_path / "disk"
    with open(image, "wb") as handle:
        handle.truncate(512 << 20)
    subprocess.run(["mkfs.xfs", "-q", "-f", str(image)], check=True)
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def free_mb(mount: Path) -> int:
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize >> 20


def fill_to(mount: Path, free_mb: int) -> Path:
    """Leave exactly about `free_mb` MiB free (fallocate: real blocks, instantly)."""
    st = os.statvfs(mount)
    take = st.f_bavail * st.f_frsize - free_mb * (1 << 20)
    filler = mount / "filler"
    subprocess.run(["fallocate", "-l", str(take), str(filler)], check=True)
    return filler


def test_a_nearly_full_engine_disk_refuses_new_work_and_says_how_much(
    small_disk: Path,
    make_server: type[Server],  # its server goes before its disk
) -> None:
    server = make_server(engine_data_root=str(small_disk), engine_min_free_mb=MIN_FREE_MB)
    name = f"d-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--ttl", "600", check=True)
    filler = fill_to(small_disk, MIN_FREE_MB // 2)

    with server.client() as c:
        with pytest.raises(StorageLow) as refused:
            c.create_box(f"{name}-2", ttl=600)
        assert refused.value.details["min_free_mb"] == MIN_FREE_MB
        assert refused.value.details["free_mb"] < MIN_FREE_MB
        with pytest.raises(StorageLow):
            c.snapshot_box(name)
        with pytest.raises(StorageLow):
            c.fork_box(name, f"{name}-f")
        # Nothing was made, and what runs carries on.
        assert [b.name for b in c.list_boxes()] == [name]
        assert c.exec(name, ["true"]).exit_code == 0
    done = server.cli("new", "--name", f"{name}-3")
    assert done.returncode == 1, done.stderr
    assert f"below the {MIN_FREE_MB} MiB" in done.stderr and "Traceback" not in done.stderr
    status = server.cli("status", check=True).stdout
    assert "disk:" in status

    filler.unlink()
    # XFS frees a removed file's blocks in the background.
    deadline = time.monotonic() + 10
    while free_mb(small_disk) < MIN_FREE_MB and time.monotonic() < deadline:
        os.sync()
        time.sleep(0.1)
    with server.client() as c:
        c.create_box(f"{name}-2", ttl=600)
        assert sorted(b.name for b in c.list_boxes()) == [name, f"{name}-2"]
