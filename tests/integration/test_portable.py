"""Portable boxes on the real engine: a box exported from one server and imported on a
second runs with the same files (bytes, owners, xattrs, links, holes) and settings; a
file with a flipped byte, one cut short, and one whose disk was crafted (a filesystem
feature no Paddock disk has, a damaged root inode: checksums made right) are refused,
and leave neither a box nor a disk behind."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddockd.runtime.diskfile import DiskReader
from paddockd.services import box_archive

from ..dnsstub import DnsStub
from ..harness import Server
from .test_disk_copies import _CHECK, _MAKE, SAVED, TINY


def _server(path: Path, dns: DnsStub) -> Server:
    srv = Server(
        path, upstream_dns=dns.address, types={"tiny": TINY}, capacity_cpus=6, default_type="tiny"
    )
    if json.loads(srv.cli("status", "--json", check=True).stdout).get("snapshots") != "copy":
        srv.close()
        pytest.skip("the engine's filesystem makes no copy-on-write copies here")
    return srv


@pytest.fixture(scope="module")
def servers(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[tuple[Server, Server]]:
    here = _server(workdir / "export-here", dns_stub)
    there = _server(workdir / "export-there", dns_stub)
    yield here, there
    here.close()
    there.close()


@pytest.fixture(scope="module")
def exported(servers: tuple[Server, Server], workdir: Path) -> Iterator[tuple[Path, str]]:
    """A box file of a box with every kind of file, and what _CHECK says of it."""
    here, _ = servers
    name = f"pt-{uuid.uuid4().hex[:6]}"
    here.cli("new", "--name", name, "--ttl", "600", "--network", "deny-all", check=True)
    here.sh(name, _MAKE, user="root")
    before = here.sh(name, _CHECK, user="root")
    out = workdir / f"{name}.paddock"
    done = here.cli("export", name, "-o", str(out), "--json", check=True)
    assert json.loads(done.stdout)["bytes"] == out.stat().st_size
    here.cli("rm", "--force", name, check=True)
    yield out, before


def _nothing_left(srv: Server) -> None:
    assert not list((SAVED / srv.instance).glob("imports/*")), "an import left its disk"
    assert not list((SAVED / srv.instance).glob("imports/*.new")), "an import left a partial"


def test_an_exported_box_runs_on_another_server_with_the_same_files(
    servers: tuple[Server, Server], exported: tuple[Path, str]
) -> None:
    _, there = servers
    path, before = exported
    # Holes stay holes: the 1 GiB sparse file and the free disk cost nothing in the file.
    assert path.stat().st_size < 20 << 20
    made = json.loads(
        there.cli("import", str(path), "--name", "moved", "--json", check=True).stdout
    )
    try:
        assert made["state"] == "running" and made["network"]["mode"] == "deny-all"
        assert made["type"] == "tiny"
        assert there.sh("moved", _CHECK, user="root") == before
        _nothing_left(there)
    finally:
        there.cli("rm", "--force", "moved", check=True)


def test_a_snapshot_exports_as_it_was(servers: tuple[Server, Server], workdir: Path) -> None:
    here, _ = servers
    name = f"ps-{uuid.uuid4().hex[:6]}"
    here.cli("new", "--name", name, "--ttl", "600", check=True)
    try:
        here.sh(name, "echo then > /config/when")
        here.cli("snapshot", name, "--name", "then", check=True)
        here.sh(name, "echo now > /config/when")
        out = workdir / f"{name}-then.paddock"
        here.cli("export", f"{name}:then", "-o", str(out), check=True)
        here.cli("import", str(out), "--name", f"{name}-back", check=True)
        try:
            assert here.sh(f"{name}-back", "cat /config/when") == "then\n"
        finally:
            here.cli("rm", "--force", f"{name}-back", check=True)
    finally:
        here.cli("rm", "--force", name, check=True)


def _refused(srv: Server, path: Path, why: str) -> None:
    before = json.loads(srv.cli("ls", "--json", check=True).stdout)
    done = srv.cli("import", str(path), "--name", "never")
    assert done.returncode == 1 and why in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(srv.cli("ls", "--json", check=True).stdout) == before
    _nothing_left(srv)


def test_a_flipped_byte_or_a_cut_file_is_refused_and_leaves_nothing(
    servers: tuple[Server, Server], exported: tuple[Path, str], workdir: Path
) -> None:
    _, there = servers
    raw = bytearray(exported[0].read_bytes())
    flipped = workdir / "flipped.paddock"
    raw[len(raw) // 2] ^= 0x01
    flipped.write_bytes(bytes(raw))
    _refused(there, flipped, "not a whole Paddock box file")
    cut = workdir / "cut.paddock"
    cut.write_bytes(exported[0].read_bytes()[: len(raw) * 2 // 3])
    _refused(there, cut, "not a whole Paddock box file")


class _FileSink:
    def __init__(self, path: Path, size: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, size)

    def write(self, offset: int, data: bytes) -> None:
        os.pwrite(self.fd, data, offset)


@pytest.mark.parametrize(
    ("craft", "why"),
    [
        (["tune2fs", "-O", "encrypt"], "features no Paddock disk has"),
        (["debugfs", "-w", "-R", "clri <2>"], "filesystem is damaged"),
    ],
)
def test_a_crafted_disk_with_a_right_checksum_never_reaches_the_kernel(
    servers: tuple[Server, Server],
    exported: tuple[Path, str],
    workdir: Path,
    craft: list[str],
    why: str,
) -> None:
    _, there = servers
    image = workdir / f"crafted-{uuid.uuid4().hex[:6]}.ext4"
    with exported[0].open("rb") as f:
        manifest, extract = box_archive.open_archive(f.read)
        sink = _FileSink(image, manifest.disk_size)
        extract(sink)
        os.close(sink.fd)
    subprocess.run([*craft, str(image)], check=True, capture_output=True)
    disk = DiskReader(image)
    crafted = workdir / "crafted.paddock"
    try:
        crafted.write_bytes(b"".join(box_archive.write(manifest, disk)))
    finally:
        disk.close()
        image.unlink()
    _refused(there, crafted, why)
