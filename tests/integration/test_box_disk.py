"""Each box's disk size, on the real engine of a kernel without XFS quotas: the box's root
and its /var/lib/docker are filesystems of their type's size; a box that fills either gets
ENOSPC and nothing else notices; `df` in the box shows its size; the size outlives a
stop, a resume and its filesystem being unmounted (a reboot); removal leaves nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from paddockd.domain.errors import PaddockError
from paddockd.runtime import runfs
from paddockd.runtime.base import ContainerSpec, Mount
from paddockd.runtime.docker import DockerRuntime
from paddockd.runtime.drivefs import DriveFs

from ..dnsstub import DnsStub
from ..harness import DRIVES, ENGINE_SOCKET, Server, wait_for

TINY = {"cpus": 1, "memory_mb": 512, "pids": 512, "description": "tests", "disk_mb": 160}
DISKS = DRIVES.root.parent / "paddock-disks"


@pytest.fixture(scope="module")
def sized(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[Server]:
    srv = Server(workdir / "sized", upstream_dns=dns_stub.address, types={"tiny": TINY})
    yield srv
    srv.close()


@pytest.fixture
def tiny(sized: Server) -> Iterator[str]:
    name = f"dk-{uuid.uuid4().hex[:6]}"
    sized.cli("new", "--type", "tiny", "--name", name, "--ttl", "600", check=True)
    yield name
    sized.cli("rm", "--force", name)


def _mounts() -> set[str]:
    with open("/proc/self/mountinfo") as table:
        return {line.split()[4] for line in table}


def _cid(server: Server, box: str) -> str:
    with server.client() as c:
        name = f"paddock-{c.get_box(box).id}"
    return str(docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}").inspect_container(name)["Id"])


def test_a_full_root_is_no_space_in_the_box_and_nowhere_else(sized: Server, tiny: str) -> None:
    size_mb = int(sized.sh(tiny, "df -m --output=size / | tail -1"))
    assert 130 <= size_mb <= 160, size_mb  # the type's size, less ext4's own keeping
    other = f"dk-{uuid.uuid4().hex[:6]}"
    sized.cli("new", "--type", "tiny", "--name", other, "--ttl", "600", check=True)
    try:
        done = sized.cli(
            "exec", tiny, "--", "sh", "-c",
            "dd if=/dev/zero of=/config/big bs=1M count=300 2>&1; echo exit=$?",
        )  # fmt: skip
        assert "No space left on device" in done.stdout and "exit=1" in done.stdout
        assert "exit=0" in sized.cli(
            "exec", other, "--", "sh", "-c", "dd if=/dev/zero of=/config/f bs=1M count=50; "
            "echo exit=$?"
        ).stdout  # fmt: skip
        with sized.client() as c:
            stats = c.box_stats(tiny)
        assert stats.disk_quota_bytes == 2 * 160 << 20  # its root and its Docker data
        assert (stats.disk_bytes or 0) > 120 << 20
        # Freeing space lets the box go on, and gives it back to the engine's disk.
        image = DISKS / f"{_cid(sized, tiny)}.ext4"
        assert image.stat().st_blocks * 512 > 120 << 20
        assert sized.sh(
            tiny, "rm /config/big && sync && echo ok > /config/after && cat /config/after"
        )
        deadline = time.monotonic() + 15
        while image.stat().st_blocks * 512 > 60 << 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert image.stat().st_blocks * 512 <= 60 << 20
    finally:
        sized.cli("rm", "--force", other, check=True)


def test_the_boxs_docker_data_has_the_same_size(sized: Server, tiny: str) -> None:
    size_mb = int(sized.sh(tiny, "df -m --output=size /var/lib/docker | tail -1"))
    assert 130 <= size_mb <= 160, size_mb
    done = sized.cli(
        "exec", tiny, "--", "sudo", "sh", "-c",
        "dd if=/dev/zero of=/var/lib/docker/big bs=1M count=300 2>&1; echo exit=$?",
    )  # fmt: skip
    assert "No space left on device" in done.stdout and "exit=1" in done.stdout
    # Box root owns it, as Docker wants its data root.
    assert sized.sh(tiny, "stat -c %U /var/lib/docker").strip() == "root"


def test_the_size_outlives_stop_resume_and_a_reboots_unmount(sized: Server, tiny: str) -> None:
    cid = _cid(sized, tiny)
    sized.sh(tiny, "echo kept > /config/kept")
    sized.cli("stop", tiny, check=True)
    layer = Path((DISKS / f"{cid}.layer").read_text())
    assert str(layer) in _mounts()
    # As after a reboot: nothing is mounted; the box's start must mount its disk first, or
    # the engine would start it on the empty folder under it (its files gone, no size).
    subprocess.run(["umount", str(layer)], check=True)
    sized.cli("resume", tiny, check=True)
    assert sized.sh(tiny, "cat /config/kept") == "kept\n"
    assert 130 <= int(sized.sh(tiny, "df -m --output=size / | tail -1")) <= 160


def test_a_box_cannot_take_its_disk_away_or_reach_its_file(sized: Server, tiny: str) -> None:
    cid = _cid(sized, tiny)
    layer = Path((DISKS / f"{cid}.layer").read_text())
    done = sized.cli(
        "exec", tiny, "--", "sudo", "sh", "-c",
        "umount -l / 2>&1; mount -o remount,size=100G / 2>&1; echo done",
    )  # fmt: skip
    assert "done" in done.stdout
    assert str(layer) in _mounts()
    out = sized.cli(
        "exec", tiny, "--", "sh", "-c",
        "dd if=/dev/zero of=/config/big bs=1M count=300 2>&1; echo exit=$?",
    ).stdout  # fmt: skip
    assert "No space left on device" in out


def test_the_run_folder_cannot_fill_the_hosts_disk(sized: Server, tiny: str) -> None:
    # /run/paddock is a host folder next to paddockd's database: a tmpfs of 1 MiB.
    done = sized.cli(
        "exec", tiny, "--", "sudo", "sh", "-c",
        "dd if=/dev/zero of=/run/paddock/big bs=1M count=50 2>&1; echo exit=$?",
    )  # fmt: skip
    assert "No space left on device" in done.stdout and "exit=1" in done.stdout
    with sized.client() as c:
        box_id = c.get_box(tiny).id
    run = sized.dir / "data" / "boxes" / box_id / "run"
    assert str(run) in _mounts()
    assert (run / "big").stat().st_size <= 1 << 20


def test_removal_leaves_no_file_mount_or_loop_device(sized: Server) -> None:
    name = f"dk-{uuid.uuid4().hex[:6]}"
    sized.cli("new", "--type", "tiny", "--name", name, "--ttl", "600", check=True)
    cid = _cid(sized, name)
    layer = Path((DISKS / f"{cid}.layer").read_text())
    image = DISKS / f"{cid}.ext4"
    with sized.client() as c:
        box_dir = sized.dir / "data" / "boxes" / c.get_box(name).id
    sized.cli("rm", "--force", name, check=True)
    # `rm` answers at once; the container and its disk go just after.
    wait_for(lambda: not image.exists(), 30, "the box's disk to go")
    assert not (DISKS / f"{cid}.layer").exists()
    assert str(layer) not in _mounts()
    assert not [m for m in _mounts() if m.startswith(f"{box_dir}/")]
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(image) not in loops


def test_a_crashs_leftover_disk_is_swept(sized: Server) -> None:
    # A disk whose container the engine no longer has (paddockd died between the two).
    ghost = uuid.uuid4().hex * 2
    (DISKS / f"{ghost}.ext4").write_bytes(b"")
    (DISKS / f"{ghost}.layer").write_text(f"{DISKS}/x/overlay2/{ghost}")
    deadline = time.monotonic() + 20
    while (DISKS / f"{ghost}.ext4").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (DISKS / f"{ghost}.ext4").exists()
    assert not (DISKS / f"{ghost}.layer").exists()


@pytest.mark.parametrize("existed", [False, True])
def test_a_failed_create_drops_only_the_volume_it_made(tmp_path: Path, existed: bool) -> None:
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    volume = f"pdtest-{uuid.uuid4().hex[:8]}"
    if existed:  # an existing box's: its Docker data, never to be dropped
        api.create_volume(volume)
    drives = DriveFs(tmp_path / "drives")
    rt = DockerRuntime(ENGINE_SOCKET, drives=drives, disks=tmp_path / "disks")
    spec = ContainerSpec(
        box_id=uuid.uuid4().hex[:12], hostname="x", image="pdtest-no-such-image:1", cpus=1,
        memory_mb=256, pids=64, run_dir=tmp_path / "run",
        mounts=(Mount(volume, "/var/lib/docker", size_mb=64),), disk_mb=64,
    )  # fmt: skip
    try:
        with pytest.raises(PaddockError):
            asyncio.run(rt.create(spec))
        names = {v["Name"] for v in api.volumes()["Volumes"] or ()}
        assert (volume in names) is existed
        assert not drives.has(volume)
        assert str(tmp_path / "drives" / f"{volume}.mnt") not in _mounts()
    finally:
        with contextlib.suppress(docker.errors.APIError):
            api.remove_volume(volume)
        drives.remove(volume)
        runfs.release(tmp_path / "run")


def test_a_volumes_filesystem_left_without_its_volume_is_swept(sized: Server) -> None:
    # A sized volume's filesystem whose engine volume is gone: paddockd died between the
    # engine's removal and its own. Made for real, then aged past the grace for creates.
    volume = f"paddock-box-{uuid.uuid4().hex[:12]}-docker"
    point = DRIVES.create(volume, 64 << 20)
    image = DRIVES.root / f"{volume}.ext4"
    os.utime(image, (time.time() - 3600, time.time() - 3600))
    try:
        deadline = time.monotonic() + 20
        while image.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not image.exists()
        assert point not in _mounts()
    finally:
        DRIVES.remove(volume)


def test_a_box_with_a_full_disk_still_stops_resumes_and_says_why(sized: Server, tiny: str) -> None:
    sized.sh(tiny, "echo kept > /config/kept")
    sized.cli(
        "exec",
        tiny,
        "--",
        "sh",
        "-c",
        "fallocate -l 1G /config/big; dd if=/dev/zero of=/config/big2 bs=4k",
    )
    assert "100%" in sized.sh(tiny, "df --output=pcent / | tail -1")
    pulled = sized.cli("pull", tiny, "/config/kept", "--to", str(sized.dir / "kept"))
    if pulled.returncode != 0:  # the engine makes its mount points in the full layer
        assert "the box's disk is full" in pulled.stderr, pulled.stderr
        assert "/var/lib" not in pulled.stderr and "Traceback" not in pulled.stderr
    # The engine makes folders in the layer for every mount of the box's root: a full
    # disk must not keep it from stopping (snapshot) and starting again.
    sized.cli("stop", tiny, check=True)
    sized.cli("resume", tiny, check=True)
    assert sized.sh(tiny, "rm -f /config/big /config/big2 && cat /config/kept") == "kept\n"
