"""A drive's files changed by host root (drive_files.py), on a real folder: links a box
planted are never followed, opened or written through; a listing stops at its cap; a
removal walks only real folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paddockd import drive_files as df

OWNER = df.Owner(None)


@pytest.fixture
def drive(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "drive", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("host")
    return root, outside


def test_a_write_lands_whole_and_replaces_a_link(drive: tuple[Path, Path]) -> None:
    root, outside = drive
    (root / "pw").symlink_to(outside / "secret")
    w = df.Writing(str(root), "/pw", False, os.getuid(), os.getgid(), 0o4755, OWNER)
    w.write(b"new")
    made = w.done()
    assert (outside / "secret").read_text() == "host"
    assert not (root / "pw").is_symlink() and (root / "pw").read_text() == "new"
    assert made["mode"] == 0o755  # no setuid
    assert [p.name for p in root.iterdir()] == ["pw"]  # no temporary file left


def test_links_and_fifos_on_the_way_are_refused(drive: tuple[Path, Path]) -> None:
    root, outside = drive
    (root / "escape").symlink_to(outside)
    os.mkfifo(root / "pipe")
    with pytest.raises(df.Unusable), df.opened(str(root), "/escape/secret"):
        pass
    with pytest.raises(df.Unusable), df.opened(str(root), "/pipe"):
        pass
    with pytest.raises(df.Unusable):
        df.Writing(str(root), "/escape/new", True, 0, 0, 0o644, OWNER)
    with pytest.raises(df.Unusable):
        df.parts("/a/../../etc")
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_removal_never_walks_into_a_link(drive: tuple[Path, Path]) -> None:
    root, outside = drive
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f").write_text("x")
    (root / "d" / "out").symlink_to(outside)
    (root / "d" / "e" / "out").symlink_to(outside / "secret")
    df.remove(str(root), "/d")
    assert list(root.iterdir()) == []
    assert (outside / "secret").read_text() == "host"


def test_a_listing_stops_at_its_cap(
    drive: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = drive
    for i in range(30):
        (root / f"f{i:02}").write_text("")
    monkeypatch.setattr(df, "MAX_ENTRIES", 10)
    with pytest.raises(df.Unusable, match="more than 10"):
        df.listing(str(root), "/", 1, OWNER)
    monkeypatch.setattr(df, "MAX_ENTRIES", 100)
    assert [e["name"] for e in df.listing(str(root), "/", 1, OWNER)][:2] == ["f00", "f01"]
