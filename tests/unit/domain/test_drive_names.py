"""Drive names: they become engine volume names and, for sized drives, file names in a
folder host root mounts from, so only whole names of the documented alphabet pass."""

from __future__ import annotations

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.snapshot import drive_mount, parse_drive, validate_drive_name


@pytest.mark.parametrize("name", ["data", "a", "x.y_z-1", "9" * 63])
def test_good_names_pass(name: str) -> None:
    assert validate_drive_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "data\n", "Data", "-x", ".x", "a/b", "a..b", "a b", "9" * 64, "dätä"]
)
def test_other_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest, match="invalid drive name"):
        validate_drive_name(name)
    with pytest.raises(InvalidRequest):
        parse_drive(name + ":ro")


@pytest.mark.parametrize(
    ("spec", "mounted"),
    [
        ("data", ("data", False, "/mnt/data")),
        ("data:ro", ("data", True, "/mnt/data")),
        ("data@/data", ("data", False, "/data")),
        ("data@/home/user/data:ro", ("data", True, "/home/user/data")),
        ("data@/workspace/x.y", ("data", False, "/workspace/x.y")),
    ],
)
def test_mount_paths(spec: str, mounted: tuple[str, bool, str]) -> None:
    assert drive_mount(spec) == mounted
    assert parse_drive(spec) == mounted[:2]


@pytest.mark.parametrize(
    "spec",
    [
        "data@relative",
        "data@/",
        "data@/a/../etc",
        "data@/a//b",
        "data@/a/",
        "data@/a b",
        "data@/a:b",
        "data@/proc",
        "data@/proc/x",
        "data@/sys/fs",
        "data@/dev/x",
        "data@/etc",
        "data@/var/lib/docker",
        "data@/run/paddock",
        "data@/usr/local/x",
        "data:rx",
        "data:ro@/x",
    ],
)
def test_bad_mount_paths_are_refused(spec: str) -> None:
    with pytest.raises(InvalidRequest):
        drive_mount(spec)
