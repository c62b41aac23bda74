"""The userns OCI wrapper: cgroup mounts become writable, and only the box's cgroup
directories (never its limit files) are handed to its mapped root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from paddockd.runtime import oci

SPEC = {
    "mounts": [
        {"destination": "/proc", "type": "proc", "options": ["nosuid"]},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "options": ["ro", "nosuid", "nodev"]},
    ],
    "linux": {
        "cgroupsPath": "/paddock/abc123",
        "uidMappings": [{"containerID": 0, "hostID": 200000, "size": 65536}],
        "gidMappings": [{"containerID": 0, "hostID": 200000, "size": 65536}],
    },
}


def test_before_create_makes_only_the_cgroup_mount_writable(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SPEC))
    oci.before_create(config)
    mounts = json.loads(config.read_text())["mounts"]
    assert mounts[1]["options"] == ["rw", "nosuid", "nodev"] and mounts[0]["options"] == ["nosuid"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_after_create_hands_over_directories_but_not_limits(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SPEC))
    root = tmp_path / "cgroup"
    for hierarchy in ("memory", "cpu,cpuacct", "pids"):
        box = root / hierarchy / "paddock" / "abc123"
        box.mkdir(parents=True)
        for name in ("cgroup.procs", "tasks", "memory.limit_in_bytes", "pids.max"):
            (box / name).write_text("")
    (root / "cpu").symlink_to(root / "cpu,cpuacct")
    handed = oci.after_create(config, root)
    assert len(handed) == 3
    memory = root / "memory" / "paddock" / "abc123"
    assert memory.stat().st_uid == 200000 and (memory / "cgroup.procs").stat().st_uid == 200000
    assert (memory / "memory.limit_in_bytes").stat().st_uid == 0
    assert (root / "pids" / "paddock" / "abc123" / "pids.max").stat().st_uid == 0


def test_a_box_without_user_namespace_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**SPEC, "linux": {"cgroupsPath": "/paddock/x"}}))
    assert oci.after_create(config, tmp_path) == []


def test_wrapper_passes_everything_but_create_straight_to_runc(tmp_path: Path) -> None:
    fake_runc = tmp_path / "runc"
    fake_runc.write_text('#!/bin/sh\necho "runc $*"\n')
    fake_runc.chmod(0o755)
    wrapper = tmp_path / "paddock-runc"
    wrapper.write_text(oci.wrapper_script("/nonexistent/python", str(fake_runc)))
    wrapper.chmod(0o755)
    out = subprocess.run(
        [str(wrapper), "--root", "/run/x", "--log", "l.json", "exec", "--pid-file", "p", "id"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "runc --root /run/x --log l.json exec --pid-file p id\n"
    failed = subprocess.run([str(wrapper), "--root", "create", "create", "--bundle", "b", "id"])
    assert failed.returncode != 0  # create goes through the (here missing) python hook


def test_no_code_path_asks_for_dangerous_options() -> None:
    src = Path(__file__).resolve().parents[3] / "src"
    text = "\n".join(p.read_text() for p in src.rglob("*.py"))
    for bad in (
        "privileged=True",
        "seccomp=unconfined",
        "systempaths=unconfined",
        "apparmor=unconfined",
    ):
        assert bad not in text, bad
