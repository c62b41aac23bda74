"""Snapshots, restore, fork and named drives on the real engine, with what a snapshot
must leave out: memory, processes and named drives."""

from __future__ import annotations

import json
import uuid

from .conftest import Server


def test_snapshot_restore_and_fork(server: Server, box: str) -> None:
    server.sh(box, "echo v1 > /config/f")
    assert server.cli("snapshot", box, "--name", "v1", check=True).stdout.strip() == "1"
    server.sh(box, "echo v2 > /config/f && echo new > /config/g")
    listed = json.loads(server.cli("snapshots", box, "--json", check=True).stdout)
    assert [(s["id"], s["label"], s["kind"]) for s in listed] == [(1, "v1", "live")]
    assert listed[0]["size_bytes"] > 0

    restored = json.loads(
        server.cli("restore", box, "--snapshot", "v1", "--json", check=True).stdout
    )
    assert restored["state"] == "running"
    assert server.sh(box, "cat /config/f; ls /config/g 2>&1 || true").startswith("v1\n")

    fork = f"f-{uuid.uuid4().hex[:6]}"
    server.cli("fork", box, "--name", fork, check=True)
    try:
        server.sh(fork, "echo fork > /config/f")
        server.sh(box, "echo source > /config/f")
        assert server.sh(fork, "cat /config/f") == "fork\n"
        assert server.sh(box, "cat /config/f") == "source\n"
        shown = json.loads(server.cli("show", fork, "--json", check=True).stdout)
        assert shown["type"] == "small" and shown["state"] == "running"
        # Disks copy here: the fork has a copy of its own as its first snapshot, and the
        # source keeps no snapshot for it.
        source_snaps = json.loads(server.cli("snapshots", box, "--json", check=True).stdout)
        assert [s["kind"] for s in source_snaps] == ["live"]
        assert source_snaps[0]["method"] == "copy"
        (own,) = json.loads(server.cli("snapshots", fork, "--json", check=True).stdout)
        assert (own["kind"], own["method"], own["current"]) == ("fork", "copy", True)
        assert own["shared_bytes"] > 0  # its blocks are the source's until one changes
        # The snapshot it stands on can go (as E2B deletes a sandbox's newest): the box
        # keeps a copy of its own, and its files stay.
        gone = server.cli("snapshots", "rm", fork, "1")
        assert gone.returncode == 0, gone.stderr
        assert server.sh(fork, "cat /config/f") == "fork\n"
    finally:
        server.cli("rm", "--force", fork, check=True)

    old = f"o-{uuid.uuid4().hex[:6]}"
    server.cli("fork", box, "--name", old, "--snapshot", "v1", check=True)
    try:
        assert server.sh(old, "cat /config/f") == "v1\n"
    finally:
        server.cli("rm", "--force", old, check=True)


def test_snapshots_keep_files_only_not_processes_or_memory(server: Server, box: str) -> None:
    server.sh(
        box,
        "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & "
        "echo x > /dev/shm/in-ram && echo disk > /config/on-disk",
    )
    assert "sleep 1000" in server.sh(box, "ps -eo args")
    server.cli("stop", box, check=True)
    server.cli("resume", box, check=True)
    after = server.sh(box, "ps -eo args; ls /dev/shm; cat /config/on-disk")
    assert "sleep 1000" not in after and "in-ram" not in after and "disk" in after


def test_drives_outlive_boxes_are_shared_and_not_in_snapshots(server: Server) -> None:
    drive = f"d-{uuid.uuid4().hex[:6]}"
    a, b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", a, "--drive", drive, check=True)
    try:
        server.sh(a, f"echo one > /mnt/{drive}/data && stat -c %U /mnt/{drive}")
        server.cli("snapshot", a, "--name", "s", check=True)
        server.sh(a, f"echo two > /mnt/{drive}/data")
        server.cli("restore", a, "--snapshot", "s", check=True)
        assert server.sh(a, f"cat /mnt/{drive}/data") == "two\n"  # not rolled back

        server.cli("new", "--name", b, "--drive", f"{drive}:ro", check=True)
        assert server.sh(b, f"cat /mnt/{drive}/data") == "two\n"
        ro = server.cli("exec", b, "--", "touch", f"/mnt/{drive}/x")
        assert ro.returncode != 0 and "read-only" in ro.stderr.lower()

        listed = {
            d["name"]: d for d in json.loads(server.cli("drive", "ls", "--json", check=True).stdout)
        }
        assert sorted(listed[drive]["boxes"]) == sorted([a, b]) and listed[drive]["size_bytes"] > 0
        refused = server.cli("drive", "rm", drive)
        assert refused.returncode == 1 and a in refused.stderr and b in refused.stderr

        server.cli("rm", "--force", a, check=True)
        server.cli("rm", "--force", b, check=True)
        server.cli("new", "--name", a, "--drive", drive, check=True)
        assert server.sh(a, f"cat /mnt/{drive}/data") == "two\n"
    finally:
        server.cli("rm", "--force", a)
        server.cli("rm", "--force", b)
        server.cli("drive", "rm", drive)
    assert drive not in server.cli("drive", "ls", check=True).stdout


def test_bad_state_requests(server: Server, box: str) -> None:
    for args, message in [
        (["restore", box, "--snapshot", "99"], "no snapshot '99'"),
        (["fork", box, "--snapshot", "nope"], "no snapshot 'nope'"),
        (["snapshots", "rm", box, "42"], "no snapshot '42'"),
        (["fork", box, "--name", box], "already exists"),
        (["snapshot", box, "--name", "bad label"], "invalid snapshot label"),
        (["drive", "create", "../etc"], "invalid drive name"),
        (["drive", "create", "a/b"], "invalid drive name"),
        (["new", "--drive", "x/../y"], "invalid drive name"),
        (["drive", "rm", "never-made"], "no drive named"),
    ]:
        done = server.cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)


def test_paddockd_killed_mid_stop_finishes_the_stop_on_restart(make_server) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import time

    from .conftest import PADDOCK

    srv: Server = make_server()
    srv.cli("new", "--name", "crashy", check=True)
    srv.sh(
        "crashy",
        "head -c 300M /dev/urandom > /config/big && md5sum /config/big > /config/big.md5",
    )
    stopping = subprocess.Popen(
        [PADDOCK, "stop", "crashy"],
        env=srv.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # the stop (and its commit of 300 MB) is under way
    srv.kill()
    stopping.wait(timeout=30)
    srv.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads(srv.cli("show", "crashy", "--json", check=True).stdout)["state"]
        if state in ("stopped", "running"):
            break
        time.sleep(0.5)
    assert state in ("stopped", "running"), state
    if state == "stopped":
        srv.cli("resume", "crashy", check=True)
    assert srv.sh("crashy", "md5sum -c /config/big.md5 >/dev/null && echo intact") == "intact\n"
