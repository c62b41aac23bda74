"""Box lifecycle on the real engine: stop/resume, repair, TTL, capacity, paddockd restarts."""

from __future__ import annotations

import json
import os
import subprocess
import time

import docker

from paddock import Client

from .conftest import ENGINE_SOCKET, PADDOCKD, Server


def wait_for(predicate, timeout: float = 20.0, step: float = 0.25) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def test_stop_resume_keeps_the_whole_filesystem(server: Server, box: str) -> None:
    with server.client() as c:
        c.exec(
            box,
            "echo home > /config/h.txt && sudo sh -c 'echo sys > /opt/s.txt'",
        )
        stopped = c.stop_box(box)
        assert stopped.state == "stopped" and stopped.snapshots == 1
        assert c.resume_box(box).state == "running"
        got = c.exec(box, ["cat", "/config/h.txt", "/opt/s.txt"])
        assert got.exit_code == 0 and got.stdout == "home\nsys\n"


def test_a_lost_container_is_rebuilt_from_its_snapshot(server: Server, box: str) -> None:
    with server.client() as c:
        c.exec(box, "echo kept > /config/k.txt")
        c.stop_box(box)
        c.resume_box(box)
        before = c.get_box(box)
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        api.remove_container(f"paddock-{before.id}", force=True)
        # The periodic reconcile notices and repairs it.
        assert wait_for(
            lambda: (
                c.get_box(box).message is not None and "recreated" in (c.get_box(box).message or "")
            )
        )
        assert c.exec(box, ["cat", "/config/k.txt"]).stdout == "kept\n"


def test_ls_and_show_json(server: Server, box: str) -> None:
    listed = json.loads(server.cli("ls", "--json", check=True).stdout)
    mine = next(b for b in listed if b["name"] == box)
    for key in ("name", "id", "state", "type", "created_at", "expires_at"):
        assert key in mine
    shown = json.loads(server.cli("show", mine["id"][:8], "--json", check=True).stdout)
    assert shown["name"] == box and shown["profile"] == "userns"


def test_exec_streams_output_as_it_is_produced(server: Server, box: str) -> None:
    with server.client() as c:
        started = time.monotonic()
        stream = c.exec_stream(box, ["sh", "-c", "echo first; sleep 2; echo second >&2; exit 3"])
        events = []
        for kind, data in stream:
            events.append((kind, data, time.monotonic() - started))
    assert events[0][:2] == ("stdout", b"first\n") and events[0][2] < 1.5
    assert events[-1][:2] == ("stderr", b"second\n") and events[-1][2] >= 2
    assert stream.exit_code == 3


def test_exec_options_and_stdin(server: Server, box: str) -> None:
    done = server.cli(
        "exec",
        "-u",
        "root",
        "-w",
        "/tmp",
        "-e",
        "GREETING=hi there",
        box,
        "--",
        "sh",
        "-c",
        'echo "$(id -un) $(pwd) $GREETING"',
        check=True,
    )
    assert done.stdout == "root /tmp hi there\n"
    piped = server.cli(
        "exec", "-i", box, "--", "sh", "-c", "tr a-z A-Z", stdin=b"hello\n", check=True
    )
    assert piped.stdout == "HELLO\n"


def test_ttl_stop_keeps_files_and_ttl_delete_removes(server: Server) -> None:
    with server.client() as c:
        c.create_box("ttl-stop", ttl=2)
        c.exec("ttl-stop", "echo survived > /config/x")
        c.create_box("ttl-delete", ttl=2, ttl_action="delete")
        assert wait_for(lambda: c.get_box("ttl-stop").state == "stopped")
        assert wait_for(lambda: "ttl-delete" not in {b.name for b in c.list_boxes()})
        assert c.get_box("ttl-stop").snapshots == 1
        c.resume_box("ttl-stop")
        assert c.exec("ttl-stop", ["cat", "/config/x"]).stdout == "survived\n"
        extended = c.extend_box("ttl-stop", 3600)
        assert extended.expires_at is not None
        c.delete_box("ttl-stop", force=True)


def test_a_deadline_is_kept_on_time_not_a_pass_late(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server(reap_interval=30)  # passes far apart: deadlines still on time
    with srv.client() as c:
        c.create_box("soon", ttl=600, ttl_action="delete")
        started = time.monotonic()
        c.extend_box("soon", 2)  # set anew, shorter: the reaper is told
        assert wait_for(lambda: "soon" not in {b.name for b in c.list_boxes()}, timeout=20)
        took = time.monotonic() - started
    assert took < 6, f"reaped {took:.1f} s after a 2 s deadline"


def test_capacity_refusal_creates_nothing(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server(capacity_memory_mb=1536)
    srv.cli("new", "--name", "fits", "--type", "small", check=True)
    refused = srv.cli("new", "--name", "too-many", "--type", "small")
    assert refused.returncode == 1 and "server is full" in refused.stderr
    names = [c["Labels"]["paddock.name"] for c in srv.containers()]  # type: ignore[index]
    assert names == ["fits"]
    assert "too-many" not in srv.cli("ls", check=True).stdout
    # The refusal says what the caller can do: stop their own box, and where to look.
    assert "running boxes (fits" in refused.stderr and "paddock status" in refused.stderr
    # A fork that cannot fit is refused before it copies anything, retried or not.
    for _ in range(3):
        forked = srv.cli("fork", "fits", "--name", "copy")
        assert forked.returncode == 1 and "server is full" in forked.stderr, forked.stderr
    assert srv.cli("snapshots", "fits", "--json", check=True).stdout.strip() == "[]"
    names = [c["Labels"]["paddock.name"] for c in srv.containers()]  # type: ignore[index]
    assert names == ["fits"]


def test_idle_boxes_fit_by_memory_not_by_cpu(make_server) -> None:  # type: ignore[no-untyped-def]
    """The default model: CPU is shared (more small boxes run than 4 x cores, which once
    refused the ninth here), each weighted by its CPUs; memory claims are what counts."""
    from concurrent.futures import ThreadPoolExecutor

    speck = {"cpus": 1, "memory_mb": 96, "pids": 128, "disk_mb": 256}
    srv: Server = make_server(capacity_cpus=0, capacity_memory_mb=0, types={"speck": speck})
    names = [f"idle-{i}" for i in range(4 * (os.cpu_count() or 1) + 1)]

    def make(name: str) -> None:
        with srv.client() as c:
            c.create_box(name, box_type="speck", ttl=600)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(make, names))
    status = json.loads(srv.cli("status", "--json", check=True).stdout)["capacity"]
    assert status["cpus_total"] is None and status["memory_used_mb"] == 96 * len(names)
    assert status["memory_overcommit"] == 4 and status["memory_available_mb"] > 0
    with srv.client() as c:
        seen = c.exec(names[-1], "cat /proc/self/oom_score_adj /sys/fs/cgroup/cpu/cpu.shares")
    assert seen.stdout.split() == ["500", "1024"], seen.stdout


def test_paddockd_restart_keeps_boxes_and_heals_what_changed_meanwhile(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server()
    with srv.client() as c:
        c.create_box("survivor", ttl=600)
        c.create_box("expires-while-down", ttl=3)
        c.exec("survivor", "echo still-here > /config/s")
    srv.kill()
    time.sleep(3.5)  # the second box's TTL passes while paddockd is down
    srv.start()
    with Client(url=srv.url, token=srv.token) as c:
        assert c.get_box("survivor").state == "running"
        assert c.exec("survivor", ["cat", "/config/s"]).stdout == "still-here\n"
        assert wait_for(lambda: c.get_box("expires-while-down").state == "stopped")


def test_orphan_containers_are_removed(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server()
    srv.cli("new", "--name", "orphaned", check=True)
    srv.kill()
    (srv.dir / "data" / "paddock.db").unlink()  # the store forgets the box
    for suffix in ("-wal", "-shm"):
        (srv.dir / "data" / f"paddock.db{suffix}").unlink(missing_ok=True)
    srv.token = subprocess.run(
        [PADDOCKD, "--config", str(srv.config), "token", "create"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    volume = f"paddock-box-{srv.containers()[0]['Labels']['paddock.box']}-docker"  # type: ignore[index]
    srv.start()
    assert wait_for(lambda: srv.containers() == [])
    # Its Docker volume (a filesystem of its own) goes with it.
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    assert wait_for(lambda: volume not in {v["Name"] for v in api.volumes()["Volumes"] or ()})
