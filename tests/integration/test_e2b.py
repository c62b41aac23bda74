"""The official `e2b` Python SDK, unmodified, against a live paddockd and real boxes
(docs/e2b.md). Every SDK call stays on loopback: the SDK is pointed at the test server, and a
dead proxy catches anything that would leave for E2B's cloud."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from ..harness import e2b_python_env
from .conftest import Server
from .test_members import create_owner, member_token

e2b = pytest.importorskip("e2b")
from e2b.sandbox.filesystem.filesystem import WriteEntry  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def sdk_env(server: Server) -> Iterator[dict[str, str]]:
    with e2b_python_env(server) as env:
        yield env


@pytest.fixture(scope="module")
def sbx(sdk_env: dict[str, str]) -> Iterator[e2b.Sandbox]:
    box = e2b.Sandbox.create(metadata={"suite": "e2b", "n": "1"}, envs={"GREETING": "hi"})
    yield box
    box.kill()


def test_create_info_list(sbx: e2b.Sandbox) -> None:
    info = sbx.get_info()
    assert info.sandbox_id == sbx.sandbox_id
    assert info.metadata == {"suite": "e2b", "n": "1"}
    listed = e2b.Sandbox.list(query=e2b.SandboxQuery(metadata={"suite": "e2b"})).next_items()
    assert [s.sandbox_id for s in listed] == [sbx.sandbox_id]
    assert e2b.Sandbox.list(query=e2b.SandboxQuery(metadata={"suite": "nope"})).next_items() == []
    assert sbx.is_running()


def test_commands(sbx: e2b.Sandbox) -> None:
    r = sbx.commands.run("echo $GREETING; echo oops >&2; whoami")
    assert r.stdout == "hi\nabc\n"
    assert r.stderr == "oops\n"
    assert r.exit_code == 0
    with pytest.raises(e2b.CommandExitException) as failed:
        sbx.commands.run("exit 3")
    assert failed.value.exit_code == 3
    assert sbx.commands.run("echo $X", envs={"X": "y"}).stdout == "y\n"
    assert sbx.commands.run("whoami", user="root").stdout == "root\n"
    # E2B's layout: its user's home is /home/user (the box user's home, /config).
    sbx.files.write("/home/user/e2b-home.txt", "home")
    assert sbx.commands.run("cat ~/e2b-home.txt /home/user/e2b-home.txt").stdout == "homehome"
    # ...and its user's name: `user` is the box user too (abc stays the name shown).
    found = sbx.commands.run(
        "id -u user; getent passwd user | cut -d: -f6; chown user:user ~/e2b-home.txt"
    )
    assert found.stdout == "1000\n/home/user\n"
    seen: list[str] = []
    sbx.commands.run("echo a; echo b", on_stdout=seen.append)
    assert "".join(seen) == "a\nb\n"


def test_background_stdin_kill(sbx: e2b.Sandbox) -> None:
    h = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "hello\n")
    assert h.pid in [p.pid for p in sbx.commands.list()]
    sbx.commands.close_stdin(h.pid)
    assert h.wait().stdout == "hello\n"
    sleeper = sbx.commands.run("sleep 600", background=True)
    again = sbx.commands.connect(sleeper.pid)
    assert sbx.commands.kill(sleeper.pid)
    with pytest.raises(e2b.CommandExitException):
        again.wait()
    assert sleeper.pid not in [p.pid for p in sbx.commands.list()]


def test_pty(sbx: e2b.Sandbox) -> None:
    out = bytearray()
    h = sbx.pty.create(e2b.PtySize(rows=24, cols=80))
    sbx.pty.resize(h.pid, e2b.PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(h.pid, b"stty size; exit\n")
    h.wait(on_pty=out.extend)
    assert b"30 100" in out


def test_signed_file_links_work_for_their_file_only(sbx: e2b.Sandbox, server: Server) -> None:
    """`download_url`/`upload_url`: links anyone may use, with no key, for one file and
    one operation; the SDK builds them at the server's root (`/files`)."""
    sbx.files.write("signed.txt", "signed bytes")
    url = sbx.download_url("signed.txt")
    assert url.startswith(server.url + "/files?") and "signature=v1_" in url
    assert server.token not in url and "pdk_" not in url
    got = httpx.get(url, timeout=30)
    assert (got.status_code, got.text) == (200, "signed bytes")
    up = sbx.upload_url("uploaded.txt", use_signature_expiration=120)
    sent = httpx.post(up, files={"file": ("uploaded.txt", b"from a link")}, timeout=30)
    assert sent.status_code == 200, sent.text
    assert sbx.files.read("uploaded.txt") == "from a link"
    # Another file, another operation, a link past its time, no signature: all refused.
    refused = [
        httpx.get(url.replace("signed.txt", "uploaded.txt"), timeout=30),
        httpx.get(up, timeout=30),
        httpx.get(sbx.download_url("signed.txt", use_signature_expiration=-10), timeout=30),
        httpx.get(f"{server.url}/files?path=signed.txt", timeout=30),
        httpx.post(url, files={"file": ("signed.txt", b"overwritten")}, timeout=30),
    ]
    assert [r.status_code for r in refused] == [401] * 5, [r.text for r in refused]
    assert sbx.files.read("signed.txt") == "signed bytes"
    # The envd token the SDK holds is the sandbox's own: not the API key, useless elsewhere.
    token = sbx._envd_access_token
    assert token and token.startswith("pde_") and token != server.token
    listed = httpx.get(f"{server.url}/e2b/sandboxes", headers={"X-API-Key": token}, timeout=30)
    assert listed.status_code == 401


def test_files(sbx: e2b.Sandbox) -> None:
    sbx.files.write("notes/a.txt", "hello")
    assert sbx.files.read("notes/a.txt") == "hello"
    blob = bytes(range(256)) * 100
    sbx.files.write("/tmp/blob.bin", blob)
    assert bytes(sbx.files.read("/tmp/blob.bin", format="bytes")) == blob
    many = [WriteEntry(path=f"many/f{i}.txt", data=f"n{i}") for i in range(5)]
    assert len(sbx.files.write_files(many)) == 5
    names = sorted(e.name for e in sbx.files.list("many"))
    assert names == [f"f{i}.txt" for i in range(5)]
    # Listed as envd walks (by name, a folder's contents after it), and a link's target
    # is the full path it leads to.
    sbx.commands.run("mkdir -p order/b order/a && touch order/c order/a/z order/b/y "
                     "&& ln -s ../many/f2.txt order/link")  # fmt: skip
    walked = [e.path.removeprefix("/config/order/") for e in sbx.files.list("order", depth=2)]
    assert walked == ["a", "a/z", "b", "b/y", "c", "link"]
    link = next(e for e in sbx.files.list("order") if e.name == "link")
    assert link.symlink_target == "/config/many/f2.txt"
    assert sbx.files.exists("many/f1.txt")
    assert not sbx.files.exists("many/none")
    info = sbx.files.rename("many/f1.txt", "moved/f1.txt")
    assert info.path == "/config/moved/f1.txt"
    assert sbx.files.read("moved/f1.txt") == "n1"
    assert sbx.files.get_info("moved").type == e2b.FileType.DIR
    sbx.files.remove("many")
    assert not sbx.files.exists("many")
    assert sbx.files.make_dir("newdir")
    assert not sbx.files.make_dir("newdir")
    with pytest.raises(e2b.NotFoundException):
        sbx.files.read("nope.txt")
    # The kernel's files say 0 bytes and hold more: read as a program reads them.
    boot_id = sbx.files.read("/proc/sys/kernel/random/boot_id")
    assert boot_id == sbx.commands.run("cat /proc/sys/kernel/random/boot_id").stdout
    assert len(boot_id.strip()) == 36


def test_git(sbx: e2b.Sandbox) -> None:
    """The SDK's git helpers run git through commands.run: the box's git does the work."""
    sbx.git.init("repo", initial_branch="main")
    sbx.git.configure_user("Box User", "box@paddock.invalid")
    sbx.files.write("repo/a.txt", "a")
    assert [f.name for f in sbx.git.status("repo").file_status] == ["a.txt"]
    sbx.git.add("repo")
    sbx.git.commit("repo", "first")
    status = sbx.git.status("repo")
    assert (status.current_branch, status.file_status) == ("main", [])
    assert sbx.commands.run("git -C repo log --format=%an:%s").stdout == "Box User:first\n"


def _events_until(
    handle: e2b.sandbox_sync.filesystem.watch_handle.WatchHandle,
    want: set[tuple[str, e2b.FilesystemEventType]],
    timeout: float = 10,
) -> list[e2b.FilesystemEvent]:
    seen: list[e2b.FilesystemEvent] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not want <= {(e.name, e.type) for e in seen}:
        seen += handle.get_new_events()
        time.sleep(0.2)
    assert want <= {(e.name, e.type) for e in seen}, seen
    return seen


def _watchers_in_box(server: Server, sbx: e2b.Sandbox) -> int:
    # The in-box watcher is `python3 -c <inbox_watch.py>`; its text names inotify_init1.
    out = server.sh(sbx.sandbox_id, "pgrep -c -f 'inotify_init[1]' || true", user="root")
    return int(out.strip() or 0)


def test_watch_dir(server: Server, sbx: e2b.Sandbox) -> None:
    """Every change, as inotify in the box reports it: even a file made, renamed and
    removed in one go, which no polling could see."""
    t = e2b.FilesystemEventType
    sbx.files.make_dir("watched/sub")
    handle = sbx.files.watch_dir("watched", recursive=True, include_entry=True)
    sbx.files.write("watched/new.txt", "x")
    sbx.commands.run(
        "cd ~/watched && echo y > sub/deep.txt && chmod 600 sub/deep.txt"
        " && echo z > brief && mv brief gone && rm gone && mkdir late && echo w > late/f"
    )
    seen = _events_until(
        handle,
        {
            ("new.txt", t.CREATE),
            ("new.txt", t.WRITE),
            ("sub/deep.txt", t.CREATE),
            ("sub/deep.txt", t.CHMOD),
            ("brief", t.RENAME),
            ("gone", t.CREATE),
            ("gone", t.REMOVE),
            ("late", t.CREATE),
            # A folder made after the watch began is watched too.
            ("late/f", t.CREATE),
        },
    )
    created = next(e for e in seen if e.name == "sub/deep.txt" and e.type == t.CREATE)
    assert created.entry is not None
    assert created.entry.path == "/config/watched/sub/deep.txt"
    assert created.entry.owner == "abc"
    assert _watchers_in_box(server, sbx) == 1
    handle.stop()
    # Removing the watcher ends its process in the box.
    _until(lambda: _watchers_in_box(server, sbx) == 0, timeout=10)
    with pytest.raises(e2b.SandboxException):
        handle.get_new_events()
    with pytest.raises(e2b.NotFoundException):
        sbx.files.watch_dir("no-such-folder")


def test_watch_dir_polls_without_python(server: Server, sbx: e2b.Sandbox) -> None:
    """A box that cannot run the inotify watcher (no python3) is polled: slower, coarser,
    but the events still come."""
    server.sh(sbx.sandbox_id, "mv /usr/bin/python3 /usr/bin/python3.away", user="root")
    try:
        sbx.files.make_dir("polled")
        handle = sbx.files.watch_dir("polled")
        assert _watchers_in_box(server, sbx) == 0
        sbx.files.write("polled/a.txt", "x")
        _events_until(handle, {("a.txt", e2b.FilesystemEventType.CREATE)})
        sbx.files.remove("polled/a.txt")
        _events_until(handle, {("a.txt", e2b.FilesystemEventType.REMOVE)})
        handle.stop()
    finally:
        server.sh(sbx.sandbox_id, "mv /usr/bin/python3.away /usr/bin/python3", user="root")


def test_timeout_pause_resume(sdk_env: dict[str, str]) -> None:
    box = e2b.Sandbox.create(timeout=120)
    try:
        box.files.write("keep.txt", "kept")
        watch = box.files.watch_dir(".")
        box.set_timeout(600)
        end = box.get_info().end_at
        assert 500 < end.timestamp() - time.time() <= 600
        box.pause()
        assert box.get_info().state == e2b.SandboxState.PAUSED
        again = e2b.Sandbox.connect(box.sandbox_id)
        assert again.files.read("keep.txt") == "kept"
        # Processes do not outlive a pause, and a watch is one.
        with pytest.raises(e2b.NotFoundException, match="watcher has ended"):
            watch.get_new_events()
        assert again.get_info().state == e2b.SandboxState.RUNNING
    finally:
        box.kill()
    with pytest.raises(e2b.NotFoundException):
        e2b.Sandbox.connect(box.sandbox_id)


def test_as_e2b_answers(sdk_env: dict[str, str]) -> None:
    """Where code written for E2B's cloud expects an answer: a paused or killed sandbox is
    not running (no exception), removing a missing file succeeds, a connect never shortens
    a running sandbox's timeout, and options Paddock does not offer are refused by name."""
    box = e2b.Sandbox.create(timeout=600)
    try:
        box.files.remove("/tmp/never-there")
        e2b.Sandbox.connect(box.sandbox_id, timeout=30)
        assert box.get_info().end_at.timestamp() - time.time() > 500
        e2b.Sandbox.connect(box.sandbox_id, timeout=900)
        assert box.get_info().end_at.timestamp() - time.time() > 800
        assert box.is_running()
        box.pause()
        assert not box.is_running()
    finally:
        box.kill()
    assert not box.is_running()
    for options, says in (
        ({"mcp": {"github": {"githubPersonalAccessToken": "x"}}}, "no MCP gateway"),
        ({"lifecycle": {"on_timeout": {"action": "pause", "mode": "full"}}}, "memory"),
    ):
        before = {s.sandbox_id for s in e2b.Sandbox.list().next_items()}
        with pytest.raises(e2b.SandboxException, match=says):
            e2b.Sandbox.create(**options)
        assert {s.sandbox_id for s in e2b.Sandbox.list().next_items()} == before


def test_a_command_of_a_killed_sandbox_ends_as_on_e2b(sdk_env: dict[str, str]) -> None:
    """Killed (or paused) under a running command, its stream ends unfinished, as envd's:
    the SDK finds the sandbox gone and says so, rather than reading an exit code."""
    for end in ("kill", "pause"):
        box = e2b.Sandbox.create(timeout=600)
        try:
            h = box.commands.run("sleep 600", background=True)
            time.sleep(0.5)
            getattr(e2b.Sandbox, end)(box.sandbox_id)
            with pytest.raises(e2b.SandboxNotRunningException):
                h.wait()
        finally:
            box.kill()


def test_auth_and_other_users(server: Server, sbx: e2b.Sandbox) -> None:
    with pytest.raises(e2b.AuthenticationException):
        e2b.Sandbox.list(api_key="pdk_wrong").next_items()
    create_owner(server)
    token = member_token(server, "e2bmember")
    listed = e2b.Sandbox.list(api_key=token).next_items()
    assert sbx.sandbox_id not in [s.sandbox_id for s in listed]
    with pytest.raises(e2b.NotFoundException):
        e2b.Sandbox.connect(sbx.sandbox_id, api_key=token)


def test_list_pages(sdk_env: dict[str, str]) -> None:
    run = uuid.uuid4().hex[:8]
    made = [e2b.Sandbox.create(metadata={"pages": run}) for _ in range(3)]
    try:
        ids = [s.sandbox_id for s in made]
        query = e2b.SandboxQuery(metadata={"pages": run})
        for order, expected in (("asc", ids), ("desc", ids[::-1])):
            pager = e2b.Sandbox.list(query=query, limit=2, order=order)
            pages = []
            while pager.has_next:
                pages.append([s.sandbox_id for s in pager.next_items()])
            assert pages == [expected[:2], expected[2:]]
        # Newest first when no order is sent (as E2B's); a token handed back later still
        # starts after the sandbox it names.
        first = e2b.Sandbox.list(query=query, limit=1)
        assert [s.sandbox_id for s in first.next_items()] == ids[-1:]
        rest = e2b.Sandbox.list(query=query, limit=5, next_token=first.next_token)
        assert [s.sandbox_id for s in rest.next_items()] == ids[-2::-1]
        assert not rest.has_next
    finally:
        for s in made:
            s.kill()


def test_snapshots_and_fork(sdk_env: dict[str, str], server: Server) -> None:
    """A snapshot is a template to create from; a fork is a new sandbox from the source's
    files now, with its metadata and env vars; the source runs on, untouched."""
    run = uuid.uuid4().hex[:8]
    src = e2b.Sandbox.create(metadata={"snap": run}, envs={"E": "1"})
    made: list[e2b.Sandbox] = []
    try:
        src.files.write("state.txt", "v1")
        snap = src.create_snapshot(name=f"first-{run}")
        assert snap.names == [f"first-{run}"]
        assert snap.snapshot_id.startswith(src.sandbox_id + ":")
        src.files.write("state.txt", "v2")
        made.append(e2b.Sandbox.create(snap.snapshot_id))
        assert made[0].files.read("state.txt") == "v1"
        assert made[0].get_info().template_id == snap.snapshot_id
        mine = src.list_snapshots().next_items()
        assert [s.snapshot_id for s in mine] == [snap.snapshot_id]
        by_name = e2b.Sandbox.list_snapshots(name=f"first-{run}").next_items()
        assert [s.snapshot_id for s in by_name] == [snap.snapshot_id]

        forks = src.fork(count=2, timeout=600)
        assert all(isinstance(f, e2b.Sandbox) for f in forks), forks
        made += [f for f in forks if isinstance(f, e2b.Sandbox)]
        for f in made[1:]:
            assert f.files.read("state.txt") == "v2"
            assert f.get_info().metadata == {"snap": run}
            assert f.commands.run("echo $E").stdout == "1\n"
            assert 500 < f.get_info().end_at.timestamp() - time.time() <= 600
        made[1].files.write("state.txt", "fork")
        assert src.files.read("state.txt") == "v2"
        assert src.is_running()
        # The fork's own snapshot is listed with the named one.
        assert len(src.list_snapshots().next_items()) == 2

        # Where snapshots are copies of a disk, a sandbox made from one has a copy of its
        # own and the snapshot can go at once (and the sandbox keeps its files); where
        # they are commits, one a sandbox still runs on stays until it is gone.
        if _copies(server):
            assert e2b.Sandbox.delete_snapshot(snap.snapshot_id) is True
            assert made[0].files.read("state.txt") == "v1"
            # A running sandbox's newest snapshot goes too, as on E2B; its files stay.
            newest = made[0].create_snapshot()
            assert e2b.Sandbox.delete_snapshot(newest.snapshot_id) is True
            assert made[0].files.read("state.txt") == "v1"
            assert made[0].list_snapshots().next_items() == [] or all(
                s.snapshot_id != newest.snapshot_id for s in made[0].list_snapshots().next_items()
            )
        else:
            with pytest.raises(e2b.SandboxException, match="base of"):
                e2b.Sandbox.delete_snapshot(snap.snapshot_id)
            made.pop(0).kill()
            assert e2b.Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert e2b.Sandbox.delete_snapshot(snap.snapshot_id) is False
        with pytest.raises(e2b.SandboxException, match=r"404: snapshot .* not found"):
            e2b.Sandbox.create(snap.snapshot_id)
    finally:
        for box in (*made, src):
            box.kill()


def _copies(server: Server) -> bool:
    """Whether the server's snapshots are copies of a box's disk (`paddock status`)."""
    with server.client() as c:
        return c.status().snapshots == "copy"


def _e2b_rows(server: Server) -> set[str]:
    with sqlite3.connect(f"file:{server.dir / 'data' / 'paddock.db'}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT box_id FROM e2b_sandboxes")}


def _until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout} s")


def test_rows_go_with_the_box(server: Server, sdk_env: dict[str, str]) -> None:
    """A sandbox deleted by Paddock itself (its TTL, `paddock rm`) leaves no E2B row."""
    native = e2b.Sandbox.create(metadata={"gone": "native"}, envs={"A": "1"})
    ttl = e2b.Sandbox.create(metadata={"gone": "ttl"}, timeout=3)
    assert {native.sandbox_id, ttl.sandbox_id} <= _e2b_rows(server)
    with server.client() as c:
        c.delete_box(native.sandbox_id, force=True)
    _until(lambda: not {native.sandbox_id, ttl.sandbox_id} & _e2b_rows(server))
    for gone in (native, ttl):
        with pytest.raises(e2b.NotFoundException):
            e2b.Sandbox.connect(gone.sandbox_id)


def test_update_network_sets_the_box_policy(server: Server, sdk_env: dict[str, str]) -> None:
    """update_network replaces the egress rules as `paddock network` sets them; a rule
    Paddock cannot keep is refused and changes nothing; nothing asked is the default."""
    sbx = e2b.Sandbox.create(timeout=600)
    try:
        with server.client() as c:
            default = c.get_box(sbx.sandbox_id).network
            sbx.update_network({"allow_out": ["pypi.org", "*.pythonhosted.org"]})
            net = c.get_box(sbx.sandbox_id).network
            assert net is not None and net.mode == "allowlist"
            assert net.allow == ["pypi.org", "*.pythonhosted.org"]
            sbx.update_network({"deny_out": ["0.0.0.0/0"]})
            net = c.get_box(sbx.sandbox_id).network
            assert net is not None and net.mode == "deny-all"
            with pytest.raises(e2b.SandboxException, match="denyOut"):
                sbx.update_network({"deny_out": ["198.18.0.1"]})
            assert c.get_box(sbx.sandbox_id).network == net
            sbx.update_network({})
            assert c.get_box(sbx.sandbox_id).network == default
    finally:
        sbx.kill()


def test_metrics_over_time(sdk_env: dict[str, str]) -> None:
    """get_metrics gives a reading every few seconds (not one of now), and the window
    asked for."""
    sbx = e2b.Sandbox.create(timeout=600)
    try:
        sbx.commands.run("timeout 20 sh -c 'while :; do :; done'", background=True)
        deadline = time.monotonic() + 60
        while len(metrics := sbx.get_metrics()) < 3:
            assert time.monotonic() < deadline, metrics
            time.sleep(1)
        stamps = [m.timestamp for m in metrics]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert 3 <= (stamps[-1] - stamps[0]).total_seconds() <= 60
        assert max(m.cpu_used_pct for m in metrics) > 10  # the loop shows
        assert all(0 < m.mem_used < m.mem_total for m in metrics)
        one = stamps[1].replace(microsecond=0)
        window = sbx.get_metrics(start=one, end=one + timedelta(seconds=1))
        assert [m.timestamp for m in window] == [stamps[1]]
    finally:
        sbx.kill()


def test_volumes_are_drives_mounted_where_asked(server: Server, sdk_env: dict[str, str]) -> None:
    """Volume.create/list/get_info/destroy are the caller's named drives; volume_mounts
    mounts one at the path asked; its files outlive the sandbox; a bad mount path is
    refused with nothing made."""
    name = f"vol-{uuid.uuid4().hex[:6]}"
    vol = e2b.Volume.create(name)
    try:
        assert vol.volume_id == name and vol.name == name
        assert name in [v.name for v in e2b.Volume.list()]
        first = e2b.Sandbox.create(timeout=600, volume_mounts={"/data": vol})
        try:
            first.commands.run("echo kept > /data/note.txt")
            info = e2b.Sandbox.get_info(first.sandbox_id)
            assert [(m["name"], m["path"]) for m in info.volume_mounts] == [(name, "/data")]
            assert first.commands.run("findmnt -n -o TARGET /data").stdout.strip() == "/data"
        finally:
            first.kill()
        second = e2b.Sandbox.create(timeout=600, volume_mounts={"/home/user/v": name})
        try:
            assert second.commands.run("cat /home/user/v/note.txt").stdout == "kept\n"
        finally:
            second.kill()
        before = {s.sandbox_id for s in e2b.Sandbox.list().next_items()}
        with pytest.raises(e2b.SandboxException, match="mount"):
            e2b.Sandbox.create(volume_mounts={"/proc/x": vol})
        assert {s.sandbox_id for s in e2b.Sandbox.list().next_items()} == before
    finally:
        assert e2b.Volume.destroy(vol.volume_id)
    assert name not in [v.name for v in e2b.Volume.list()]
    with server.client() as c:
        assert name not in [d.name for d in c.list_drives()]


def test_a_volumes_files_through_its_content_api(server: Server, sdk_env: dict[str, str]) -> None:
    """The volume content API (`vol.list`, `read_file`, `write_file`, ...) on a drive a
    sandbox uses at the same time: what one writes the other sees, owned by E2B's user;
    links a box plants are never followed by the host (read, written through, or walked);
    another volume's token opens nothing."""
    name = f"volc-{uuid.uuid4().hex[:6]}"
    vol = e2b.Volume.create(name)
    other = e2b.Volume.create(f"{name}-b")
    sbx = e2b.Sandbox.create(timeout=600, volume_mounts={"/home/user/v": vol})
    try:
        made = vol.write_file("/dir/a.txt", "hello", force=True)
        assert (made.name, made.type.value, made.size, made.uid) == ("a.txt", "file", 5, 1000)
        assert vol.read_file("dir/a.txt") == "hello"
        assert vol.read_file("/dir/a.txt", format="bytes") == b"hello"
        vol.write_file("/dir/a.txt", b"\x00\x01" * 70000)  # replaced whole
        assert vol.get_info("/dir/a.txt").size == 140000
        vol.make_dir("/made")
        assert vol.update_metadata("/dir/a.txt", mode=0o600).mode == 0o600
        assert vol.exists("/dir/a.txt") and not vol.exists("/nope")
        with pytest.raises(e2b.NotFoundException):
            vol.read_file("/nope")
        listed = {(e.path, e.type.value) for e in vol.list("/", depth=2)}
        assert {("/dir", "directory"), ("/dir/a.txt", "file"), ("/made", "directory")} <= listed
        seen = sbx.commands.run(
            "stat -c '%U %a %s' ~/v/dir/a.txt; ls -ld ~/v/made | cut -d' ' -f3"
        ).stdout
        assert seen == "abc 600 140000\nabc\n"
        # What the box plants: a link to /, one to a host file, a FIFO.
        sbx.commands.run(
            "cd /home/user/v && ln -s / escape && ln -s /etc/passwd pw && mkfifo pipe", user="root"
        )
        passwd = Path("/etc/passwd").read_bytes()
        for path in ("/escape/etc/hostname", "/pw", "/pipe"):
            with pytest.raises(e2b.VolumeException, match="not a"):
                vol.read_file(path)
        with pytest.raises(e2b.VolumeException, match="escape is not a folder"):
            vol.write_file("/escape/tmp/paddock-escape", "x", force=True)
        assert not Path("/tmp/paddock-escape").exists()
        assert vol.get_info("/pw").target == "/etc/passwd"
        vol.write_file("/pw", "replaced")  # the link is replaced, never written through
        assert Path("/etc/passwd").read_bytes() == passwd
        assert sbx.commands.run("cat ~/v/pw; test -L ~/v/pw || echo ' plain'").stdout == (
            "replaced plain\n"
        )
        vol.remove("/dir")
        assert not vol.exists("/dir/a.txt")
        # Another volume's token, or none: refused, and the body is never written.
        url = f"{server.url}/e2b/volumecontent/{name}/file?path=/stolen.txt"
        for auth in (f"Bearer {other.token}", "Bearer pdv_-_forged", ""):
            r = httpx.put(url, content=b"x", headers={"Authorization": auth}, timeout=30)
            assert r.status_code == 401, r.text
        assert not vol.exists("/stolen.txt")
    finally:
        sbx.kill()
        e2b.Volume.destroy(vol.volume_id)
        e2b.Volume.destroy(other.volume_id)


def test_unknown_call_is_a_clear_error(server: Server, sbx: e2b.Sandbox) -> None:
    """What a newer SDK may call and Paddock does not serve: a JSON error naming it."""
    import httpx

    key = {"X-API-Key": server.token}
    r = httpx.get(server.url + "/e2b/teams", headers=key)
    assert r.status_code == 501
    assert r.json()["error_code"] == "unsupported"
    assert "GET /e2b/teams" in r.json()["message"]
    # An RPC of a known service that this envd lacks, and one of a service it lacks.
    envd = {"X-Access-Token": server.token, "E2b-Sandbox-Id": sbx.sandbox_id}
    rpc = "/e2b/sandbox/filesystem.Filesystem/ReadXattrs"
    r = httpx.post(server.url + rpc, headers=envd, json={})
    assert r.status_code == 501
    assert r.json()["code"] == "unimplemented"
    assert "filesystem.Filesystem/ReadXattrs" in r.json()["message"]
    r = httpx.post(server.url + "/e2b/sandbox/git.Git/Clone", headers=envd, json={})
    assert r.status_code == 501
    assert "POST /e2b/sandbox/git.Git/Clone" in r.json()["message"]
    # Through the SDK itself: calls it has that Paddock does not serve yet.
    with pytest.raises(e2b.SandboxException, match="does not support file metadata"):
        sbx.files.write("tagged.txt", "x", metadata={"owner": "me"})
    assert not sbx.files.exists("tagged.txt")


def test_a_template_built_by_the_sdk(
    server: Server, sdk_env: dict[str, str], tmp_path: Path
) -> None:
    """The SDK's Template builder, built through Paddock's E2B API (its files uploaded to the
    link the API gives), then a sandbox from it by name."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.py").write_text("print('from the template')\n")
    (tmp_path / "app" / "skip.log").write_text("left out\n")
    (tmp_path / ".dockerignore").write_text("**/*.log\n")
    logs: list[str] = []
    template = (
        e2b.Template(file_context_path=str(tmp_path))
        .from_base_image()
        .set_envs({"GREETING": "hello"})
        .set_envs({"APP_MODE": 'quoted "value" $GREETING'})
        .set_workdir("/opt/app")
        .copy("app", "/opt/app/", user="abc", mode=0o750)
        .run_cmd("python3 /opt/app/main.py > /opt/app/ran.txt && echo built-ok")
        .run_cmd("whoami > /opt/app/who.txt", user="abc")
        .set_start_cmd("touch /tmp/started", "test -f /tmp/started")
    )
    info = e2b.Template.build(template, "sdk-made", on_build_logs=lambda e: logs.append(e.message))
    assert info.template_id == "sdk-made"
    assert any("built-ok" in line for line in logs), logs
    assert any("readyCmd" in line for line in logs), logs  # said, not silently dropped
    assert e2b.Template.exists("sdk-made")
    assert not e2b.Template.exists("nobody-made")
    sbx = e2b.Sandbox.create("sdk-made")
    try:
        run = sbx.commands.run(
            'cat /opt/app/ran.txt /opt/app/who.txt; echo "$GREETING|$APP_MODE"; pwd; '
            "ls -A /opt/app; stat -c %U:%a /opt/app/main.py",
            cwd="/opt/app",
        )
        lines = run.stdout.splitlines()
        assert lines[:2] == ["from the template", "abc"], run.stdout
        assert lines[2] == 'hello|quoted "value" hello', run.stdout  # $GREETING expanded
        assert "skip.log" not in run.stdout and "main.py" in run.stdout
        assert lines[-1] == "abc:750"
        assert sbx.files.exists("/tmp/started")  # the start command ran at boot
    finally:
        sbx.kill()
    with server.client() as c:
        made = c.get_template("sdk-made")
        assert made.status == "ready" and made.source == "dockerfile"
    # What cannot be built here fails clearly, before any build box.
    with pytest.raises(e2b.BuildException, match="no image registry is reachable"):
        e2b.Template.build(e2b.Template().from_image("python:3").run_cmd("true"), "pulled")
    failing = e2b.Template().from_template("sdk-made").run_cmd("exit 7")
    with pytest.raises(e2b.BuildException, match="exited with 7"):
        e2b.Template.build(failing, "fails-here")
    e2b.Template.build(e2b.Template().from_template("sdk-made").run_cmd("true"), "on-top")
    with pytest.raises(e2b.SandboxException, match="404: template 'never-built' not found"):
        e2b.Sandbox.create("never-built")
    # Tags: a build under NAME:TAG, another tag assigned to it, listed, used, removed.
    v1 = e2b.Template().from_template("sdk-made").run_cmd("echo v1 > /tmp/which")
    assert "v1" in e2b.Template.build(v1, "sdk-made:v1").tags
    assert e2b.Template.assign_tags("sdk-made:v1", ["prod"]).tags == ["prod"]
    assert {t.tag for t in e2b.Template.get_tags("sdk-made")} == {"default", "v1", "prod"}
    tagged = e2b.Sandbox.create("sdk-made:prod")
    try:
        assert tagged.commands.run("cat /tmp/which").stdout == "v1\n"
    finally:
        tagged.kill()
    e2b.Template.remove_tags("sdk-made", ["prod"])
    with pytest.raises(e2b.SandboxException, match="not found"):
        e2b.Sandbox.create("sdk-made:prod")
    with pytest.raises(e2b.exceptions.TemplateException, match="invalid template tag"):
        e2b.Template.assign_tags("sdk-made:v1", ["Bad Tag"])
    # A tag build never replaces a template that is not one ("on-top" is a plain template).
    with pytest.raises(e2b.BuildException, match="not a build of on:top"):
        e2b.Template.build(e2b.Template().from_template("sdk-made").run_cmd("true"), "on:top")
    # A tag stands for a build: rebuilt, its name's tags stand for nothing.
    e2b.Template.assign_tags("on-top", ["pinned"])
    e2b.Template.build(e2b.Template().from_template("sdk-made:v1").run_cmd("true"), "on-top")
    assert {t.tag for t in e2b.Template.get_tags("on-top")} == {"default"}
    with pytest.raises(e2b.SandboxException, match="not found"):
        e2b.Sandbox.create("on-top:pinned")
    import httpx
    from e2b.api.client.models import Template as TemplateModel

    key = {"X-API-Key": server.token}
    # The listing no SDK call makes, in the shape its generated client reads.
    for path in ("/e2b/templates", "/e2b/v2/templates"):
        listed = httpx.get(server.url + path, headers=key, timeout=30).json()
        models = {m.template_id: m for m in map(TemplateModel.from_dict, listed)}
        assert {"sdk-made", "sdk-made-v1", "on-top"} <= set(models)
        assert models["sdk-made"].build_status.value == "ready"
    for name in ("on-top", "fails-here", "sdk-made"):  # sdk-made's tagged builds go with it
        assert httpx.delete(f"{server.url}/e2b/templates/{name}", headers=key).status_code == 204
    with server.client() as c:
        assert [t.name for t in c.list_templates()] == []


def test_template_uploads_need_their_link(server: Server, sdk_env: dict[str, str]) -> None:
    """The upload link is the only key to a build's files: a made-up one is refused before
    its body is read, and one of another build's ends when that build starts."""
    import httpx

    key = {"X-API-Key": server.token}
    asked = httpx.post(f"{server.url}/e2b/v3/templates", headers=key, json={"name": "links"})
    assert asked.status_code == 202, asked.text
    build = asked.json()["buildID"]
    files_hash = "a" * 64
    link = httpx.get(f"{server.url}/e2b/templates/links/files/{files_hash}", headers=key).json()
    assert link["present"] is False and link["url"].startswith(server.url + "/e2b/")
    forged = link["url"].replace("/template-files/", "/template-files/x")
    refused = httpx.put(forged, content=b"\0" * 4096)
    assert refused.status_code == 401 and refused.json()["error_code"] == "unauthorized"
    assert httpx.put(link["url"], content=b"not a tar").status_code == 200
    bad = {"steps": [{"type": "COPY", "args": ["x", "/x"], "filesHash": files_hash}]}
    start = f"{server.url}/e2b/v2/templates/links/builds/{build}"
    failed = httpx.post(start, headers=key, json=bad)
    assert failed.status_code == 400 and "not a tar" in failed.json()["message"]
    assert httpx.put(link["url"], content=b"").status_code == 401  # its build has started
    with server.client() as c:
        assert "links" not in [t.name for t in c.list_templates()]


def test_the_async_sdk_answers_as_e2b(sdk_env: dict[str, str]) -> None:
    """The same answers through the SDK's AsyncSandbox."""
    import asyncio

    async def run() -> None:
        box = await e2b.AsyncSandbox.create(timeout=600)
        other = await e2b.AsyncSandbox.create(timeout=600)
        try:
            listed = await e2b.AsyncSandbox.list().next_items()
            ids = [s.sandbox_id for s in listed]
            assert ids.index(other.sandbox_id) < ids.index(box.sandbox_id)  # newest first
            await box.files.remove("/tmp/never-there")
            # The parity issue's other differences, through the async SDK too.
            await box.files.write("order/a.txt", "multipart")
            await box.files.make_dir("order/b")
            assert [e.name for e in await box.files.list("order")] == ["a.txt", "b"]
            assert await box.files.read("order/a.txt") == "multipart"
            assert len((await box.files.read("/proc/sys/kernel/random/boot_id")).strip()) == 36
            snap = await box.create_snapshot()
            assert await e2b.AsyncSandbox.delete_snapshot(snap.snapshot_id)
            end = (await box.get_info()).end_at
            await e2b.AsyncSandbox.connect(box.sandbox_id, timeout=10)
            assert (await box.get_info()).end_at >= end  # only ever extended
            with pytest.raises(e2b.SandboxException, match="not supported by Paddock: mcp"):
                await e2b.AsyncSandbox.create(mcp={"exa": {"apiKey": "x"}}, timeout=60)
            killed = await other.commands.run("sleep 600", background=True)
            await other.kill()
            with pytest.raises(e2b.SandboxNotRunningException):
                await killed.wait()
            assert box.get_host(8000).startswith(f"8000-{box.sandbox_id}.localhost:")
            await box.update_network({"deny_out": ["0.0.0.0/0"]})
            assert len(await box.get_metrics()) >= 1
            private = await e2b.AsyncSandbox.create(
                timeout=600, network={"allow_public_traffic": False}
            )
            assert (private.traffic_access_token or "").startswith("pdt_")
            await private.kill()
            h = await box.commands.run("sleep 600", background=True)
            await box.pause()
            assert not await box.is_running()
            with pytest.raises(e2b.SandboxNotRunningException):
                await h.wait()
        finally:
            await box.kill()
            await other.kill()

    asyncio.run(run())


def test_the_async_sdk_keeps_secrets_and_volume_files(sdk_env: dict[str, str]) -> None:
    """AsyncSecret and AsyncVolume's content calls answer as the sync ones do (the header
    a secret fills is tested against a real host in test_gateway.py)."""
    import asyncio

    name = f"async-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        made = await e2b.AsyncSecret.create(name, "s3cr3t-value", metadata={"a": "b"})
        try:
            assert (await e2b.AsyncSecret.update(name, "next-value")).version == 2
            assert made.secret_id in [
                s.secret_id for s in await e2b.AsyncSecret.list().next_items()
            ]
            with pytest.raises(e2b.exceptions.SecretException, match="exists"):
                await e2b.AsyncSecret.create(name, "again")
        finally:
            assert await e2b.AsyncSecret.destroy(name)
        assert not await e2b.AsyncSecret.exists(name)
        vol = await e2b.AsyncVolume.create(name)
        try:
            await vol.write_file("/a/b.txt", "async bytes", force=True)
            assert await vol.read_file("/a/b.txt") == "async bytes"
            assert [e.name for e in await vol.list("/a")] == ["b.txt"]
            await vol.remove("/a")
            assert not await vol.exists("/a")
        finally:
            await e2b.AsyncVolume.destroy(vol.volume_id)

    asyncio.run(run())


# A web server in the box that answers with the headers it was sent.
ECHO = """
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(self):
        body = repr(sorted(k.lower() for k in self.headers)).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
h.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
"""


def _through(server: Server, host: str, token: str | None = None) -> httpx.Response:
    """A request to `host` (what get_host gave) as a client reaches it: on this server's
    address, named by its Host header (*.localhost is loopback's)."""
    headers = {"host": host}
    if token is not None:
        headers["e2b-traffic-access-token"] = token
    return httpx.get(server.url + "/", headers=headers, timeout=10)


def _serving(server: Server, sbx: e2b.Sandbox, token: str | None = None) -> httpx.Response:
    sbx.files.write("/tmp/echo.py", ECHO)
    sbx.commands.run("python3 /tmp/echo.py", background=True)
    deadline = time.monotonic() + 30
    while True:
        r = _through(server, sbx.get_host(8000), token)
        if r.status_code == 200 or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def _state(sbx: e2b.Sandbox) -> e2b.SandboxState:
    return e2b.Sandbox.get_info(sbx.sandbox_id).state


def test_get_host_reaches_a_port(server: Server, sdk_env: dict[str, str]) -> None:
    """get_host(port) is the port's address, as on E2B: open to anyone by default; with
    allow_public_traffic=False only with the sandbox's traffic token (which the box's app
    never sees); a paused sandbox's port wakes it only with auto_resume."""
    public = e2b.Sandbox.create(timeout=600)
    private = e2b.Sandbox.create(
        timeout=600,
        network={"allow_public_traffic": False},
        lifecycle={"on_timeout": "pause", "auto_resume": True},
    )
    try:
        port = server.url.rsplit(":", 1)[1]
        assert public.get_host(8000) == f"8000-{public.sandbox_id}.localhost:{port}"
        assert public.traffic_access_token is None
        token = private.traffic_access_token
        assert token and token.startswith("pdt_")
        r = _serving(server, public)
        assert r.status_code == 200, r.text
        r = _serving(server, private, token)
        assert r.status_code == 200, r.text
        assert "e2b-traffic-access-token" not in r.text  # the box's app never sees it
        host = private.get_host(8000)
        assert _through(server, host).status_code == 401
        assert _through(server, host, "pdt_" + "A" * 43).status_code == 401
        assert _through(server, host, token + "x").status_code == 401
        # Another sandbox's host is not opened by this one's token.
        assert _through(server, public.get_host(8000), token).status_code == 200
        info = e2b.Sandbox.get_info(private.sandbox_id)
        assert info.lifecycle == {"on_timeout": "pause", "auto_resume": True}

        # Paused without auto_resume: the port answers 502 and the sandbox stays paused.
        public.pause()
        assert _through(server, public.get_host(8000)).status_code == 502
        time.sleep(1)
        assert _state(public) == e2b.SandboxState.PAUSED
        # Paused with auto_resume: a refused request wakes nothing; an admitted one does.
        private.pause()
        assert _through(server, host).status_code == 401
        time.sleep(1)
        assert _state(private) == e2b.SandboxState.PAUSED
        assert _through(server, host, token).status_code == 503  # starting
        deadline = time.monotonic() + 60
        while _state(private) != e2b.SandboxState.RUNNING:
            assert time.monotonic() < deadline, "auto_resume did not resume the sandbox"
            time.sleep(0.5)
    finally:
        public.kill()
        private.kill()
    # A killed sandbox's host is no address at all.
    assert _through(server, public.get_host(8000)).status_code == 404
