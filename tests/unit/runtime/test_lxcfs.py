"""LXCFS views: which files a box gets, and telling a live mount from a folder."""

from __future__ import annotations

from pathlib import Path

from paddockd.runtime.lxcfs import Lxcfs


def test_a_plain_folder_is_not_lxcfs(tmp_path: Path) -> None:
    (tmp_path / "lxcfs" / "proc").mkdir(parents=True)
    (tmp_path / "lxcfs" / "proc" / "uptime").write_text("1 1\n")
    assert not Lxcfs(str(tmp_path / "lxcfs")).available()
    assert not Lxcfs(str(tmp_path / "nothing")).available()


def test_binds_cover_the_views_this_lxcfs_has(tmp_path: Path) -> None:
    root = tmp_path / "lxcfs"
    for view in ("proc/meminfo", "proc/cpuinfo", "sys/devices/system/cpu/online"):
        (root / view).parent.mkdir(parents=True, exist_ok=True)
        (root / view).write_text("")
    assert Lxcfs(str(root)).binds() == {
        str(root / "proc/cpuinfo"): "/proc/cpuinfo",
        str(root / "proc/meminfo"): "/proc/meminfo",
        str(root / "sys/devices/system/cpu/online"): "/sys/devices/system/cpu/online",
    }


def test_a_missing_process_is_not_stale() -> None:
    assert not Lxcfs.stale(2**22 + 7)
