"""The engine's data filesystem for real: a sparse file formatted XFS and loop-mounted with
project quotas, an existing data root moved onto it intact, and growing it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddockd.config import EngineConfig
from paddockd.runtime import datafs

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.xfs") is None, reason="needs root and xfsprogs"
)


@pytest.fixture
def cfg(tmp_path: Path) -> Iterator[EngineConfig]:
    root = tmp_path / "engine"
    image = str(tmp_path / "engine.xfs")
    made = EngineConfig(data_root=str(root), data_image=image, data_size_gb=1)
    yield made
    subprocess.run(["umount", str(root)], capture_output=True)


def test_an_existing_data_root_moves_onto_xfs_with_quotas_intact(cfg: EngineConfig) -> None:
    root = Path(cfg.data_root)
    (root / "image" / "layers").mkdir(parents=True)
    layer = root / "image" / "layers" / "file"
    layer.write_bytes(b"x" * 4096)
    os.chown(layer, 200000, 200000)
    os.setxattr(layer, "trusted.overlay.opaque", b"y")
    os.link(layer, root / "image" / "hardlink")
    (root / "image" / "link").symlink_to("layers/file")
    # What a stopped engine leaves: its data root bound onto itself.
    subprocess.run(["mount", "--bind", str(root / "image"), str(root / "image")], check=True)
    assert not datafs.state(cfg).own

    found = datafs.ensure(cfg)

    assert found.own, found.reason
    # Per-box sizes where the kernel can enforce them, said plainly where it cannot.
    assert found.quotas or found.reason == datafs.NO_KERNEL_QUOTAS
    assert 0.9 * datafs.GIB < found.total <= datafs.GIB
    moved = root / "image" / "layers" / "file"
    info = moved.stat()
    assert (info.st_uid, info.st_gid, info.st_size) == (200000, 200000, 4096)
    assert os.getxattr(moved, "trusted.overlay.opaque") == b"y"
    assert (root / "image" / "hardlink").stat().st_ino == info.st_ino
    assert os.readlink(root / "image" / "link") == "layers/file"
    assert not root.with_name("engine.old").exists()
    # Idempotent: a second call finds it mounted and changes nothing.
    assert datafs.ensure(cfg) == datafs.state(cfg)


def test_it_grows_and_never_shrinks(cfg: EngineConfig) -> None:
    before = datafs.ensure(cfg).total
    after = datafs.grow(cfg, 2).total
    assert after > 1.8 * before
    with pytest.raises(ValueError, match="cannot shrink"):
        datafs.grow(cfg, 1)


def test_without_an_image_the_host_filesystem_is_used_and_said(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    found = datafs.ensure(EngineConfig(data_root=str(tmp_path / "engine"), data_image=""))
    assert not found.own and "data_image is empty" in found.reason


def test_a_host_without_xfs_tools_still_gets_an_engine(
    cfg: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(datafs.shutil, "which", lambda _: None)
    found = datafs.ensure(cfg)
    assert not found.own and "xfsprogs" in found.reason
    assert not Path(cfg.data_image).exists()


def test_too_little_free_space_keeps_the_host_filesystem(
    cfg: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    tight = shutil._ntuple_diskusage(20 * datafs.GIB, 10 * datafs.GIB, 10 * datafs.GIB)  # type: ignore[attr-defined]
    monkeypatch.setattr(datafs.shutil, "disk_usage", lambda _: tight)
    cfg = EngineConfig(data_root=cfg.data_root, data_image=cfg.data_image)  # size: automatic
    found = datafs.ensure(cfg)
    assert not found.own and "only 10 GiB free" in found.reason
    assert not Path(cfg.data_image).exists()
