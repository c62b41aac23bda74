"""Bad input gets a clear message and a non-zero exit; nothing is created or lost."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import PADDOCK, Server, free_port


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["new", "--type", "gigantic"], "unknown box type 'gigantic'"),
        (["new", "--name", "Bad_Name"], "invalid box name"),
        (["new", "--name", "current"], "reserved"),
        (["new", "--ttl", "-5"], "invalid ttl '-5'"),
        (["new", "--ttl", "99999999"], "maximum"),
        (["new", "--ttl", "soon"], "invalid ttl"),
        (["show", "no-such-box"], "no box named"),
        (["exec", "no-such-box", "--", "true"], "no box named"),
        (["exec", "current"], "no command given"),
        (["extend", "no-such-box", "--ttl", "60"], "no box named"),
    ],
)
def test_bad_requests(server: Server, args: list[str], message: str) -> None:
    server.deleted()  # an earlier test's boxes, whose containers go just after `rm`
    before = len(server.containers())
    done = server.cli(*args)
    assert done.returncode in (1, 2, 125), done
    assert message in done.stderr.lower(), done.stderr
    assert len(server.containers()) == before


def test_current_without_a_box(server: Server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**server.env, "PADDOCK_CONFIG": str(tmp_path / "fresh.json")}
    done = subprocess.run(
        [PADDOCK, "exec", "current", "--", "true"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 125 and "no current box" in done.stderr


def test_server_down_says_how_to_start_it(server: Server) -> None:
    env = {**server.env, "PADDOCK_URL": f"http://127.0.0.1:{free_port()}"}
    done = subprocess.run([PADDOCK, "ls"], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "cannot reach the paddock server" in done.stderr.lower() and "install.sh" in done.stderr


def test_wrong_token(server: Server) -> None:
    env = {**server.env, "PADDOCK_TOKEN": "pdk_wrong"}
    done = subprocess.run([PADDOCK, "ls"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "not accepted" in done.stderr


def test_exec_in_a_stopped_box_says_how_to_resume(server: Server) -> None:
    server.cli("new", "--name", "sleepy", check=True)
    try:
        server.cli("stop", "sleepy", check=True)
        done = server.cli("exec", "sleepy", "--", "true")
        assert done.returncode == 125 and "paddock resume sleepy" in done.stderr
    finally:
        server.cli("rm", "--force", "sleepy")


def test_version_is_fast_and_needs_no_server() -> None:
    env = {**os.environ, "PADDOCK_URL": "http://127.0.0.1:1"}
    done = subprocess.run([PADDOCK, "--version"], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("paddock ")
