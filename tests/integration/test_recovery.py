"""State a crash or an earlier box leaves behind — torn records, images without a row,
connections tracked for a reused address — never stops paddockd from starting or a box
from connecting, on the real engine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid

import docker
import pytest

from paddockd.domain.runs import Run
from paddockd.runtime.base import LABEL_INSTANCE, LABEL_SIZE

from ..harness import DRIVES, ENGINE_SOCKET, IMAGE
from .conftest import Server


def _record(box_id: str, run_id: str, status: str) -> str:
    return Run(
        run_id, box_id, "keeper", "claude", "hi", "/config", None, status, time.time()
    ).to_json()


def test_torn_run_records_and_logs_never_stop_a_start(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server()
    with srv.client() as c:
        box_id = c.create_box("keeper", ttl=900).id
    srv.kill()
    runs = srv.dir / "data" / "runs"
    runs.mkdir(exist_ok=True)
    # What an older paddockd left: a whole record, one cut short mid-write, one garbled,
    # and a log whose last line was cut short.
    (runs / "aaa111.json").write_text(_record(box_id, "aaa111", "succeeded"))
    (runs / "bbb222.json").write_text(_record(box_id, "bbb222", "running"))
    (runs / "bbb222.log").write_text('{"seq": 1, "stream": "stdout", "data": "hi"}\n{"seq": 2, "st')
    (runs / "ccc333.json").write_text(_record(box_id, "ccc333", "succeeded")[:30])
    (runs / "ddd444.json").write_bytes(b"\x00\xff\x00")
    srv.start()

    listed = json.loads(srv.cli("runs", "keeper", "--json", check=True).stdout)
    assert [(r["id"], r["status"]) for r in listed] == [("aaa111", "succeeded"), ("bbb222", "lost")]
    followed = srv.cli("runs", "follow", "bbb222")
    assert followed.stdout.startswith("hi"), followed
    log = (srv.dir / "paddockd.log").read_text()
    assert "skipped a run record: ccc333.json" in log
    assert "skipped a run record: ddd444.json" in log
    assert (runs / "ccc333.json.broken").exists() and not (runs / "aaa111.json").exists()

    # The next start has nothing more to say: the records live in the database now.
    srv.kill()
    srv.start()
    assert len(json.loads(srv.cli("runs", "keeper", "--json", check=True).stdout)) == 2
    assert (srv.dir / "paddockd.log").read_text().count("ccc333.json") == 1


def _image(api: docker.APIClient, ref: str, instance: str) -> str:
    """A snapshot-like image of `instance` with no row: what a killed fork leaves."""
    repository, tag = ref.split(":")
    # The container itself is unlabelled: the reconciler would take it for an orphan.
    helper = api.create_container(IMAGE, command=["true"])["Id"]
    try:
        api.commit(helper, repository, tag, changes=[f"LABEL {LABEL_INSTANCE}={instance}"])
    finally:
        api.remove_container(helper, force=True)
    return ref


def _exists(api: docker.APIClient, ref: str) -> bool:
    try:
        api.inspect_image(ref)
        return True
    except docker.errors.NotFound:
        return False


def test_images_no_row_needs_are_swept_and_nothing_else(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server(image_sweep_grace=8)
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    tag = uuid.uuid4().hex[:8]
    made = []
    try:
        made.append(orphan := _image(api, f"paddock-snapshots/itest{tag}:1", srv.instance))
        made.append(theirs := _image(api, f"paddock-snapshots/itest{tag}:2", f"x-{tag}"))
        time.sleep(9)  # both are past the grace period now
        made.append(fresh := _image(api, f"paddock-snapshots/itest{tag}:3", srv.instance))
        deadline = time.monotonic() + 6  # a few reconcile passes, within the fresh one's grace
        while _exists(api, orphan) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _exists(api, orphan)
        assert _exists(api, fresh) and _exists(api, theirs) and _exists(api, IMAGE)
        assert "no box or snapshot needs it" in (srv.dir / "paddockd.log").read_text()
    finally:
        for ref in made:
            with contextlib.suppress(docker.errors.APIError):
                api.remove_image(ref)


def _conntrack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["conntrack", *args], capture_output=True, text=True, check=False)


def _tracked(address: str) -> bool:
    return f"src={address} " in _conntrack("-L", "--orig-src", address).stdout


@pytest.mark.skipif(shutil.which("conntrack") is None, reason="the conntrack tool is missing")
def test_a_box_taking_an_address_forgets_its_old_connections(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server()
    prefix = srv.gateway.rsplit(".", 1)[0]
    # Entries as a previous box at each address would have left them, half-open. Only
    # table entries in the test's own subnet: no packet is sent.
    addresses = [f"{prefix}.{n}" for n in range(2, 30)]
    for address in addresses:
        _conntrack(
            "-I", "-p", "tcp", "-s", address, "-d", "198.18.0.1", "--sport", "40000",
            "--dport", "80", "--state", "SYN_SENT", "-t", "120", "-u", "SEEN_REPLY",
        )  # fmt: skip
    try:
        assert all(_tracked(a) for a in addresses)
        with srv.client() as c:
            c.create_box("fresh", ttl=900)
        (container,) = srv.containers()
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        networks = api.inspect_container(container["Id"])["NetworkSettings"]["Networks"]
        ip = next(n["IPAddress"] for n in networks.values() if n.get("IPAddress"))
        assert ip in addresses and not _tracked(ip)
        assert [a for a in addresses if not _tracked(a)] == [ip]  # nobody else's
    finally:
        for address in addresses:
            _conntrack("-D", "--orig-src", address)


def test_a_restart_finishes_the_calls_under_way_and_keeps_running_boxes(make_server) -> None:  # type: ignore[no-untyped-def]
    """What install.sh does to a running server after an update (SIGTERM to paddockd, by
    its supervisor or systemd, then a start): a command under way ends with its output,
    and a box runs on in the same container, its processes alive."""
    srv: Server = make_server()
    with srv.client() as c:
        c.create_box("stays", ttl=900)
        c.exec("stays", "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! > /tmp/kept")
        box_id = c.get_box("stays").id
    engine = docker.DockerClient(base_url=f"unix://{ENGINE_SOCKET}")
    before = engine.containers.get(f"paddock-{box_id}").attrs
    finished: dict[str, object] = {}

    def slow() -> None:
        with srv.client() as c:
            finished["result"] = c.exec("stays", "sleep 3; echo finished")

    caller = threading.Thread(target=slow)
    caller.start()
    time.sleep(1.0)  # the command is running
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.died(timeout=30)
    caller.join(timeout=30)
    result = finished["result"]
    assert getattr(result, "exit_code", None) == 0 and "finished" in getattr(result, "stdout", "")
    srv.start()
    with srv.client() as c:
        assert c.get_box("stays").state == "running"
        after = engine.containers.get(f"paddock-{box_id}").attrs
        assert (after["Id"], after["State"]["StartedAt"]) == (
            before["Id"],
            before["State"]["StartedAt"],
        )
        alive = c.exec("stays", "kill -0 $(cat /tmp/kept) && echo alive")
        assert alive.stdout.strip() == "alive", alive


def test_a_box_volume_recorded_without_its_filesystem_gets_one(make_server) -> None:  # type: ignore[no-untyped-def]
    """A create records the box's Docker volume with the engine, then makes its sized
    filesystem beside the container: a crash between the two leaves a record whose folder
    holds nothing. The box's next container gets the filesystem, not the bare folder."""
    srv: Server = make_server()
    with srv.client() as c:
        c.create_box("vol", ttl=900)
        box_id = c.get_box("vol").id
        c.stop_box("vol")
        volume = f"paddock-box-{box_id}-docker"
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        api.remove_container(f"paddock-{box_id}", force=True)  # its container is lost...
        DRIVES.remove(volume)  # ...and the volume's filesystem never made
        assert api.inspect_volume(volume)["Labels"]
        assert not DRIVES.has(volume)
        c.resume_box("vol")
        assert DRIVES.has(volume)
        seen = c.exec("vol", "stat -f -c %T /var/lib/docker; df -m --output=size /var/lib/docker")
        assert seen.stdout.split()[0] == "ext2/ext3", seen.stdout
        assert int(seen.stdout.split()[-1]) < 64 * 1024  # the box's size, not the host's disk


def test_a_box_volume_no_box_came_to_have_is_removed(make_server) -> None:  # type: ignore[no-untyped-def]
    """A pooled make records its box's Docker volume, then makes the container: a restart
    between the two left the volume and its filesystem (the box's disk size) for good.
    The reconciler's first pass after the restart removes it; another server's and a
    box's own stay."""
    server: Server = make_server()
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")

    def recorded(instance: str) -> str:  # as runtime/storage.py records one
        name = f"paddock-box-{uuid.uuid4().hex[:12]}-docker"
        api.create_volume(
            name=name,
            driver="local",
            driver_opts={"type": "none", "o": "bind", "device": DRIVES.mountpoint(name)},
            labels={LABEL_SIZE: "64", LABEL_INSTANCE: instance},
        )
        DRIVES.create(name, 64 << 20, owner=0)
        return name

    with server.client() as c:
        c.create_box("keeps-its-volume", ttl=900)
        own = f"paddock-box-{c.get_box('keeps-its-volume').id}-docker"
    server.kill()  # as a make cut short left them
    lost, others = recorded(server.instance), recorded("pdtest-another-server")
    server.start()
    try:
        deadline = time.monotonic() + 30  # the first pass, at the start
        while DRIVES.has(lost) and time.monotonic() < deadline:
            time.sleep(0.5)
        names = {v["Name"] for v in api.volumes()["Volumes"] or ()}
        assert lost not in names and not DRIVES.has(lost)
        assert {own, others} <= names and DRIVES.has(own) and DRIVES.has(others)
    finally:
        for name in (lost, others):
            with contextlib.suppress(docker.errors.APIError):
                api.remove_volume(name)
            if DRIVES.has(name):
                DRIVES.remove(name)
        with server.client() as c:
            c.delete_box("keeps-its-volume", force=True)


def test_a_box_whose_container_was_removed_by_hand_leaves_no_mount(make_server) -> None:  # type: ignore[no-untyped-def]
    """A box's run folder is a tmpfs of its own on the host (runtime/runfs.py), let go of
    when the engine removes the container through paddockd. One removed by hand left it
    mounted, and its folder with it, once the box was deleted."""
    srv: Server = make_server()
    with srv.client() as c:
        c.create_box("lost", ttl=900)
        box_id = c.get_box("lost").id
        run = srv.dir / "data" / "boxes" / box_id / "run"
        assert os.path.ismount(run)
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        api.remove_container(f"paddock-{box_id}", force=True)
        c.delete_box("lost", force=True)
    srv.deleted()
    deadline = time.monotonic() + 20  # the box's files go behind its removal
    while run.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.ismount(run)
    assert not run.parent.exists()
