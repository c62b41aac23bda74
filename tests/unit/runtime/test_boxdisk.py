"""The per-box layer filesystems' bookkeeping: only the engine's own layer folders are
ever mounted on, and what containers left behind goes (no mounts needed to check it)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from paddockd.runtime.boxdisk import BoxDisks, _fresh


def _cid() -> str:
    return uuid.uuid4().hex * 2


@pytest.fixture
def disks(tmp_path: Path) -> BoxDisks:
    (tmp_path / "engine" / "overlay2").mkdir(parents=True)
    return BoxDisks(tmp_path / "disks", tmp_path / "engine" / "overlay2")


@pytest.mark.parametrize(
    "upper",
    [
        "{layers}/{cid}/work",  # not the upper folder
        "{layers}/../{cid}/diff",  # outside the engine's layers
        "/etc/{cid}/diff",
        "{layers}/{cid}/x/diff",
        "{layers}/notalayer/diff",
        "{layers}/{cid}\n/diff",
    ],
)
def test_only_a_layer_folder_of_the_engine_is_mounted_on(disks: BoxDisks, upper: str) -> None:
    path = upper.format(layers=disks.layers, cid=_cid())
    with pytest.raises(ValueError, match="not a layer of the engine's"):
        disks.attach(_cid(), path, 1 << 30)
    assert not disks.root.exists() or not list(disks.root.glob("*.ext4"))


def test_a_symlinked_layer_folder_is_refused(disks: BoxDisks, tmp_path: Path) -> None:
    cid = _cid()
    (disks.layers / cid).symlink_to(tmp_path)
    with pytest.raises(ValueError):
        disks.attach(_cid(), f"{disks.layers}/{cid}/diff", 1 << 30)


@pytest.mark.parametrize("cid", ["../x", "a" * 63, "A" * 64, "a" * 64 + "\n"])
def test_a_container_id_is_checked(disks: BoxDisks, cid: str) -> None:
    with pytest.raises(ValueError, match="not a container id"):
        disks.release(cid)


def test_sweep_drops_the_disks_of_gone_containers_only(disks: BoxDisks) -> None:
    kept, gone = _cid(), _cid()
    disks.root.mkdir()
    for cid in (kept, gone):
        (disks.root / f"{cid}.ext4").write_bytes(b"x")
        (disks.root / f"{cid}.layer").write_text(str(disks.layers / cid))
    (disks.root / f"{gone}.ext4.new").write_bytes(b"")
    disks.sweep(lambda: [kept])
    assert sorted(p.name for p in disks.root.iterdir() if p.name != ".lock") == [
        f"{kept}.ext4",
        f"{kept}.layer",
    ]
    assert disks.size(kept) == 1 and disks.size(gone) is None


def test_sweep_leaves_a_copy_in_progress_and_drops_one_a_crash_left(disks: BoxDisks) -> None:
    # Copies of saved disks run outside the folder's lock: a stop's copy made while the
    # reaper sweeps must keep its partial file until it renames it.
    folder = disks.saved("box1/1r00000000").parent
    folder.mkdir(parents=True)
    fresh, stale = folder / "1rfresh.ext4.new", folder / "2rstale.ext4.new"
    fresh.write_bytes(b"")
    stale.write_bytes(b"")
    disks.sweep(lambda: [], min_age=600)
    assert fresh.exists() and stale.exists()
    disks.sweep(lambda: [], min_age=0)
    assert not fresh.exists() and not stale.exists()


def test_a_layer_just_made_is_told_by_its_folders_and_anything_else_is_copied(
    tmp_path: Path,
) -> None:
    layer = tmp_path / "layer"
    (layer / "diff").mkdir(parents=True)
    (layer / "work" / "work").mkdir(parents=True)
    (layer / "work" / "work").chmod(0)
    (layer / "link").write_text("ABC")
    (layer / "lower").write_text("l/DEF")
    assert [(f[0], f[1]) for f in _fresh(layer) or []] == [
        ("diff", 0o755),
        ("work", 0o755),
        ("work/work", 0),
    ]
    (layer / "diff" / "file").write_text("x")  # not new: mkfs copies what is there
    assert _fresh(layer) is None
    (layer / "diff" / "file").unlink()
    (layer / "diff").rmdir()
    (layer / "diff").symlink_to(tmp_path)
    assert _fresh(layer) is None
