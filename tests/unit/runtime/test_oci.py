"""The userns OCI wrapper: its reading of runc's arguments, cgroup mounts become writable,
and only the box's cgroup directories (never its limit files) are handed to its mapped
root. The identity part runs for real in tests/integration/hostile/test_identity.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from paddockd.runtime import oci
from paddockd.runtime.identity import Identities

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


def test_only_the_cgroup_mount_becomes_writable() -> None:
    spec = json.loads(json.dumps(SPEC))
    oci._cgroups_writable(spec)
    mounts = spec["mounts"]
    assert mounts[1]["options"] == ["rw", "nosuid", "nodev"] and mounts[0]["options"] == ["nosuid"]


def test_runc_calls_are_read_as_runc_reads_them() -> None:
    call = oci.Call.parse(
        [
            "--root",
            "/run/r",
            "--log",
            "create",  # a value that looks like a command
            "--log-format",
            "json",
            "create",
            "--bundle",
            "/b",
            "--pid-file=/b/init.pid",
            "--no-new-keyring",
            "0123abc",
        ]
    )
    assert call.command == "create" and call.cid == "0123abc"
    assert call.root == Path("/run/r") and call.bundle == Path("/b")
    assert call.options["--pid-file"] == "/b/init.pid"


def test_settings_survive_the_wrapper_script() -> None:
    settings = oci.Settings(
        runc="/usr/sbin/runc",
        identities=Path("/run/p/ids"),
        staging=Path("/run/p-roots"),
        data=(Path("/var/lib/e"),),
    )
    parsed, rest = oci.Settings.parse([*settings.args(), "--", "delete", "x"])
    assert parsed == settings and rest == ["delete", "x"]
    assert oci.Settings.parse(["--", "state", "x"])[0].identities is None


MOUNTINFO = """\
29 24 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
32 24 0:32 /process_api/x /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
33 24 0:33 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,name=systemd
40 24 0:40 / /proc rw - proc proc rw
"""
PROC_CGROUP = """\
9:name=systemd:/paddock/abc
4:memory:/process_api/x/paddock/abc
2:cpu,cpuacct:/paddock/abc
"""


def test_cgroup_paths_are_mapped_through_the_hosts_mounts() -> None:
    dirs = oci.box_cgroup_dirs(PROC_CGROUP, oci.cgroup_mounts(MOUNTINFO))
    assert dirs == [
        Path("/sys/fs/cgroup/systemd/paddock/abc"),
        Path("/sys/fs/cgroup/memory/paddock/abc"),
        Path("/sys/fs/cgroup/cpu,cpuacct/paddock/abc"),
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_after_create_hands_over_directories_but_not_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SPEC))
    box = tmp_path / "memory" / "paddock" / "abc"
    box.mkdir(parents=True)
    for name in ("cgroup.procs", "tasks", "memory.limit_in_bytes"):
        (box / name).write_text("")
    monkeypatch.setattr(oci, "box_cgroup_dirs", lambda *_: [box, box])
    pid_file = tmp_path / "pid"
    pid_file.write_text(str(os.getpid()))
    assert oci.hand_cgroups(SPEC, pid_file) == [box]
    assert box.stat().st_uid == 200000 and (box / "cgroup.procs").stat().st_uid == 200000
    assert (box / "memory.limit_in_bytes").stat().st_uid == 0


def test_a_box_without_user_namespace_is_left_alone(tmp_path: Path) -> None:
    spec = {**SPEC, "linux": {"cgroupsPath": "/paddock/x"}}
    assert oci.hand_cgroups(spec, tmp_path / "no-pid") == []


def test_wrapper_passes_everything_but_create_and_delete_straight_to_runc(
    tmp_path: Path,
) -> None:
    fake_runc = tmp_path / "runc"
    fake_runc.write_text('#!/bin/sh\necho "runc $*"\n')
    fake_runc.chmod(0o755)
    wrapper = tmp_path / "paddock-runc"
    staging = tmp_path / "roots"
    settings = oci.Settings(runc=str(fake_runc), staging=staging)
    wrapper.write_text(oci.wrapper_script("/nonexistent/python", settings))
    wrapper.chmod(0o755)
    out = subprocess.run(
        [str(wrapper), "--root", "/run/x", "--log", "l.json", "exec", "--pid-file", "p", "id"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "runc --root /run/x --log l.json exec --pid-file p id\n"
    failed = subprocess.run([str(wrapper), "--root", "create", "create", "--bundle", "b", "id"])
    assert failed.returncode != 0  # through the (here missing) python hook
    # Without identities a delete is runc's alone.
    assert run_wrapper(wrapper, "delete", "held") == "runc --root /run/x delete held\n"


def run_wrapper(wrapper: Path, *args: str, root: str = "/run/x") -> str:
    return subprocess.run(
        [str(wrapper), "--root", root, *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_delete_frees_the_staging_folder_and_identity_of_a_container_runc_forgot(
    tmp_path: Path,
) -> None:
    fake_runc = tmp_path / "runc"
    fake_runc.write_text('#!/bin/sh\necho "runc $*"\n')
    fake_runc.chmod(0o755)
    staging, state = tmp_path / "roots", tmp_path / "state"
    table = Identities(tmp_path / "ids", state, first=0x70000000, slots=4)
    settings = oci.Settings(runc=str(fake_runc), staging=staging, identities=table.folder)
    wrapper = tmp_path / "paddock-runc"
    wrapper.write_text(oci.wrapper_script("/nonexistent/python", settings))
    wrapper.chmod(0o755)
    for cid in ("gone", "alive", "other"):
        with table.take(cid):
            (staging / cid / "root").mkdir(parents=True)
            (state / cid).mkdir(parents=True)
            (state / cid / "state.json").write_text("{}")
    (state / "gone" / "state.json").unlink()  # runc forgot it; "alive" it still knows
    for cid in ("gone", "alive"):
        assert run_wrapper(wrapper, "delete", "--force", cid, root=str(state)) == (
            f"runc --root {state} delete --force {cid}\n"
        )
    assert not (staging / "gone").exists() and table.of("gone") is None
    assert (staging / "alive" / "root").is_dir() and table.of("alive") is not None
    assert table.of("other") is not None
    # Names that are no container's, and containers with nothing staged: runc's alone.
    for cid in ("free", "..", "../roots"):
        assert run_wrapper(wrapper, "delete", cid, root=str(state)) == (
            f"runc --root {state} delete {cid}\n"
        )
    assert (staging / "alive").is_dir() and (staging / "other").is_dir()


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
