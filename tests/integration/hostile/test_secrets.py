"""A local user reading paddockd's traces (issue 11, item 11): after a session that used
every kind of secret (the API token on every call, a provider key set through stdin and
handed to an agent run, a desktop link opened as a page and as a WebSocket), none of them
is in paddockd's log or in any file under its data folder, and every state file is 0600
in 0700 folders. Before the fix the WebSocket's URL, token included, was logged, and the
database, egress logs and run records were readable by everyone."""

from __future__ import annotations

import json
import os
import stat
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from websockets.sync.client import connect

from ..conftest import Server

KEY = f"sk-ant-secret-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Session:
    box_id: str
    run_id: str
    secrets: dict[str, str]


def wait_for(path: Path, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def session(server: Server) -> Iterator[Session]:
    name = f"sec-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--type", "medium", check=True)
    box_id = json.loads(server.cli("show", name, "--json", check=True).stdout)["id"]
    try:
        # A provider key, through stdin, handed to an agent run (which finds no model at
        # that address; the run is stopped at once, its record is what matters).
        server.cli(
            "auth", "set", "anthropic", "--from-stdin", "--base-url", "http://127.0.0.1:9",
            stdin=KEY.encode(), check=True,
        )  # fmt: skip
        run_id = server.cli(
            "prompt", name, "--agent", "claude", "--detach", "hi", check=True
        ).stdout.strip()
        server.cli("runs", "stop", run_id)
        # A lookup lands in the box's egress log.
        server.cli("exec", name, "--", "getent", "ahostsv4", "allowed.test")
        # A desktop link, opened the way a browser does: the page, then its WebSocket.
        link = json.loads(server.cli("desktop", name, "--json", check=True).stdout)
        with urllib.request.urlopen(link["url"], timeout=30) as page:
            assert page.status == 200
        ws = server.url.replace("http", "ws", 1) + f"/v1/boxes/{box_id}/desktop/ws"
        with connect(f"{ws}?token={link['token']}", open_timeout=10) as conn:
            assert conn.recv(timeout=10)[:4] == b"RFB "
        wait_for(server.dir / "data" / "boxes" / box_id / "egress.jsonl")
        yield Session(
            box_id,
            run_id,
            {"API token": server.token, "desktop token": link["token"], "provider key": KEY},
        )
    finally:
        server.cli("rm", "--force", name)
        server.cli("auth", "rm", "anthropic")


def state_files(data: Path) -> Iterator[Path]:
    """Every folder and file under the data folder, not following links, except inside a
    box's run folder (the box's own /run/paddock, 0755 on purpose, box-written) and a box's
    resolv.conf (0644 on purpose: every user in the box reads it; it names the gateway)."""
    for root, dirs, files in os.walk(data):
        here = Path(root)
        dirs[:] = [d for d in dirs if not (d == "run" and here.parent == data / "boxes")]
        if here.parent == data / "boxes":
            files = [f for f in files if f != "resolv.conf"]
        yield from (here / n for n in [*dirs, *files])


def test_no_secret_in_the_log_or_the_data_folder(server: Server, session: Session) -> None:
    data = server.dir / "data"
    files = [p for p in state_files(data) if p.is_file() and not p.is_symlink()]
    assert len(files) >= 5
    for path in [server.dir / "paddockd.log", *files]:
        content = path.read_bytes()
        for what, secret in session.secrets.items():
            assert secret.encode() not in content, f"the {what} is in {path}"
    # The WebSocket was logged, without its token.
    assert (
        f"/v1/boxes/{session.box_id}/desktop/ws?token=[redacted]"
        in (server.dir / "paddockd.log").read_text()
    )


def test_state_files_are_0600_in_0700_folders(server: Server, session: Session) -> None:
    data = server.dir / "data"
    expected = [
        data / "paddock.db",
        data / "credentials.key",
        data / "desktop.key",
        data / "runs" / f"{session.run_id}.log",  # its record is in the database
        data / "boxes" / session.box_id / "egress.jsonl",
    ]
    for path in expected:
        assert path.is_file(), path
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    loose = {
        str(p.relative_to(data)): oct(stat.S_IMODE(p.lstat().st_mode))
        for p in state_files(data)
        if not p.is_symlink() and p.lstat().st_mode & 0o077
    }
    assert loose == {}, "readable or writable by others"
    log = server.dir / "paddockd.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
