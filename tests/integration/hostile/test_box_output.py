"""A box that prints without end, against a real paddockd: what a box prints is the box's to
choose (its `sh`, `python3` and `find` are its own files), what paddockd holds of it and how
long it keeps paddockd's one event loop busy are not.

Before the fixes: a box's fake python3 answering an E2B directory watch with endless
lines held paddockd's event loop (the exec stream was read without ever waiting), so every
request of every user timed out for as long as the box printed; a background command whose
handle nobody read grew paddockd by ~170 MB a second (1.5 GB in 8 s here); `exec` with
`wait` and push's folder maker kept all a command printed in memory."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ...harness import e2b_python_env
from ..conftest import Server

e2b = pytest.importorskip("e2b")

pytestmark = pytest.mark.timeout(600)
MIB = 2**20


def peak_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


class Watchdog:
    """Asks paddockd's health every 0.1 s from a thread: the longest answer took."""

    def __init__(self, server: Server) -> None:
        self._url = f"{server.url}/v1/health"
        self._stop = threading.Event()
        self.slowest = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(self._url, timeout=30)
            self.slowest = max(self.slowest, time.monotonic() - began)
            time.sleep(0.1)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture(scope="module")
def sbx(server: Server) -> Iterator[e2b.Sandbox]:
    with e2b_python_env(server):
        box = e2b.Sandbox.create()
        yield box
        box.kill()


def plant(server: Server, box: str, path: str, script: str) -> None:
    """As root in the box: `path` becomes this shell script (first on the PATH)."""
    server.sh(box, f"printf '%s' '{script}' > {path} && chmod 755 {path}", user="root")


def test_a_fake_watcher_printing_without_end_neither_stalls_paddockd_nor_runs_on(
    server: Server, sbx: e2b.Sandbox
) -> None:
    plant(
        server,
        sbx.sandbox_id,
        "/usr/local/bin/python3",
        '#!/bin/sh\necho "{\\"ready\\": true}"\nexec yes 1\n',
    )
    try:
        with Watchdog(server) as dog:
            began = time.monotonic()
            watch = sbx.files.watch_dir(".", request_timeout=60)
            ended = False
            while time.monotonic() - began < 30:
                try:
                    watch.get_new_events()
                except e2b.NotFoundException:
                    ended = True
                    break
                time.sleep(0.2)
        assert ended, "the watch still reads a box that prints only noise"
        assert dog.slowest < 3, f"paddockd took {dog.slowest:.1f} s to answer meanwhile"
        watch.stop()
    finally:
        server.sh(sbx.sandbox_id, "rm -f /usr/local/bin/python3", user="root")


def test_a_background_command_nobody_reads_neither_grows_nor_stalls_paddockd(
    server: Server, sbx: e2b.Sandbox
) -> None:
    assert server.proc is not None
    pid = server.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = peak_mib(pid)
    with Watchdog(server) as dog:
        handle = sbx.commands.run("timeout 8 cat /dev/zero", background=True)
        time.sleep(10)
    grown = peak_mib(pid) - before
    assert grown < 100, f"paddockd grew by {grown} MiB for a stream nobody reads"
    assert dog.slowest < 3, f"paddockd took {dog.slowest:.1f} s to answer meanwhile"
    # `timeout` ended it. Not `handle.kill()`: the SDK would first read through the events
    # it left unread (a minute of this process's time, none of paddockd's).
    handle.disconnect()


def test_a_command_run_to_its_end_that_floods_is_refused_not_held(
    server: Server, sbx: e2b.Sandbox
) -> None:
    """`exec` with `wait` (E2B's file calls and the desktop's helpers run the same way):
    paddockd holds a bounded part of what the command prints, then gives up clearly."""
    assert server.proc is not None
    pid = server.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = peak_mib(pid)
    resp = httpx.post(
        f"{server.url}/v1/boxes/{sbx.sandbox_id}/exec?wait=true",
        json={"cmd": ["sh", "-c", "head -c 300M /dev/zero"]},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=120,
    )
    assert resp.status_code == 413, resp.text[:300]
    assert resp.json()["error"]["code"] == "payload_too_large"
    assert "printed more than 64 MiB" in resp.json()["error"]["message"]
    grown = peak_mib(pid) - before
    assert grown < 150, f"paddockd grew by {grown} MiB"


def test_a_push_into_a_box_whose_sh_floods_works_and_holds_nothing(
    server: Server, sbx: e2b.Sandbox
) -> None:
    """The box's root puts an `sh` of its own first on the PATH, printing without end: push
    (its folder, its unpacking) runs the box's /bin/sh, never the first `sh` on the PATH,
    and what paddockd holds of any of it stays bounded."""
    assert server.proc is not None
    pid = server.proc.pid
    box = sbx.sandbox_id
    plant(server, box, "/usr/local/sbin/sh", "#!/bin/dash\nexec head -c 300M /dev/zero >&2\n")
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = peak_mib(pid)
        src = server.dir / "pushed.txt"
        src.write_text("hi\n")
        done = server.cli("push", box, str(src), "--to", "/config/new-folder")
        grown = peak_mib(pid) - before
        assert grown < 100, f"paddockd grew by {grown} MiB"
        assert done.returncode == 0, done.stderr
        assert server.sh(box, "cat /config/new-folder", user="root") == "hi\n"
    finally:
        server.sh(box, "rm -f /usr/local/sbin/sh", user="root")
    assert server.sh(box, "echo ok") == "ok\n"


def test_an_agent_run_that_floods_keeps_a_bounded_log_on_the_server(
    server: Server, sbx: e2b.Sandbox
) -> None:
    """`paddock prompt` runs the box's agent, which the box's root may replace: its output
    goes to a log on the server's own disk, kept up to MAX_LOG and no further."""
    from paddockd.services.runs import MAX_LOG

    box = sbx.sandbox_id
    flood = f"head -c {(MAX_LOG >> 20) + 200}M /dev/zero | tr '\\\\0' y"
    plant(server, box, "/usr/local/sbin/claude", f"#!/bin/sh\n{flood}\n")
    with server.client() as c:
        had_key = any(k.provider == "anthropic" and k.configured for k in c.list_credentials())
    if had_key:
        pytest.skip("this server's owner has an anthropic key of their own")
    server.cli("auth", "set", "anthropic", "--from-stdin", stdin=b"sk-ant-fake-flood", check=True)
    headers = {"Authorization": f"Bearer {server.token}"}
    try:
        resp = httpx.post(
            f"{server.url}/v1/boxes/{box}/runs",
            json={"instruction": "hi", "agent": "claude"},
            headers=headers,
            timeout=60,
        )
        assert resp.status_code == 201, resp.text
        run = resp.json()["id"]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            status = httpx.get(f"{server.url}/v1/runs/{run}", headers=headers).json()["status"]
            if status != "running":
                break
            time.sleep(1)
        assert status == "succeeded"
        kept = (server.dir / "data" / "runs" / f"{run}.log").stat().st_size
        assert kept < MAX_LOG + (2 << 20), f"{kept >> 20} MiB kept of the run's output"
    finally:
        server.sh(box, "rm -f /usr/local/sbin/claude", user="root")
        server.cli("auth", "rm", "anthropic")
