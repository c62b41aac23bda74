"""No traceback reaches a user of a live server: every command with a wrong token or none,
local paths that do not exist, and commands the box cannot run (one line each, and the
exit code docs/cli.md gives)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cli_commands import runnable
from .conftest import PADDOCK, Server

# Commands that need no token: they succeed whatever it is.
NO_TOKEN_NEEDED = {
    ("help",),
    ("completion", "bash"),
    ("version",),
    ("skill",),
    ("mcp",),
    ("e2b", "env"),
}
# What the others exit with when the server refuses the token (default: 1).
REFUSED = {
    ("exec", "nosuchbox", "--", "true"): 125,
    ("shell",): 125,
    ("auth", "set", "anthropic"): 2,  # asks for the key first, and there is no terminal
    ("secret", "set", "drive1", "--host", "x"): 2,  # the same for the value
    ("template", "rebuild"): 2,  # a name or --all: a usage mistake before any request
    ("prompt", "nosuchbox"): 2,  # stdin is empty: no instruction
    ("import", "x"): 1,  # the file is looked for first: there is none to send
    ("ssh-key", "add"): 2,  # the key file is read first (no ~/.ssh/id_ed25519.pub here)
    ("forward", "nosuchbox", "x"): 2,  # "x" is no [LOCAL:]PORT
    ("logs",): 1,  # the current box, and there is none: said before any request
}


def short(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.strip(), "a failure says why"
    assert len(stderr.strip().splitlines()) <= 3, stderr


@pytest.fixture(scope="module")
def box(server: Server) -> Iterator[str]:
    """One box for the module's tests: none of them changes it."""
    name = f"err-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--ttl", "900", check=True)
    yield name
    server.cli("rm", "--force", name)


def run(
    server: Server, tmp_path: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    settings = tmp_path / "cli.json"
    if not settings.exists():
        settings.write_text(json.dumps({"url": server.url, "token": server.token}))
    return subprocess.run(
        [PADDOCK, *args],
        env={**server.env, "PADDOCK_CONFIG": str(settings), "HOME": str(tmp_path), **env},
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("args", runnable(), ids=" ".join)
def test_a_wrong_token_is_one_message(
    server: Server, tmp_path: Path, args: tuple[str, ...]
) -> None:
    if args[0] == "login":  # to this server, not the closed URL the list gives
        args = (*args[:-1], server.url)
    done = run(server, tmp_path, *args, PADDOCK_TOKEN="pdk_wrong")
    if args in NO_TOKEN_NEEDED:
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return
    assert done.returncode == REFUSED.get(args, 1), done.stderr
    short(done.stderr)
    if args not in REFUSED:
        assert "the API token was not accepted" in done.stderr


def test_no_token_says_how_to_give_one(server: Server, tmp_path: Path) -> None:
    (tmp_path / "cli.json").write_text(json.dumps({"url": server.url}))
    env = {k: v for k, v in server.env.items() if k != "PADDOCK_TOKEN"}
    done = subprocess.run(
        [PADDOCK, "ls"],
        env={**env, "PADDOCK_CONFIG": str(tmp_path / "cli.json")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "`paddock login URL`" in done.stderr and "--token-stdin" in done.stderr
    assert "--token TOKEN" not in done.stderr  # a flag that never existed
    short(done.stderr)


def test_a_url_that_is_not_paddock_says_so(server: Server, tmp_path: Path) -> None:
    # The server's own desktop page is no API: any web server answers so.
    site = subprocess.Popen(
        ["python3", "-m", "http.server", "0", "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert site.stdout is not None
        port = site.stdout.readline().split("port ")[1].split()[0]
        url = f"http://127.0.0.1:{port}"
        done = run(server, tmp_path, "login", url, "--token-stdin", stdin="pdk_x\n")
    finally:
        site.terminate()
        site.wait()
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"paddock: {url} does not look like a Paddock server (HTTP 404 for /v1/status)"
    )


def test_login_without_a_terminal_says_to_pipe_the_token(server: Server, tmp_path: Path) -> None:
    env = {k: v for k, v in server.env.items() if k != "PADDOCK_TOKEN"}
    settings = tmp_path / "cli.json"
    argv = [PADDOCK, "login", server.url]
    common = {"capture_output": True, "text": True, "timeout": 60}
    env = {**env, "PADDOCK_CONFIG": str(settings)}
    refused = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, **common)  # type: ignore[call-overload]
    assert refused.returncode == 2
    assert "--token-stdin" in refused.stderr and "PADDOCK_TOKEN" in refused.stderr
    short(refused.stderr)
    piped = subprocess.run([*argv, "--token-stdin"], env=env, input=server.token + "\n", **common)  # type: ignore[call-overload]
    assert piped.returncode == 0, piped.stderr
    assert json.loads(settings.read_text())["token"] == server.token


@pytest.mark.parametrize(
    "args",
    [
        ("push", "{box}", "/no/such/dir", "--to", "/config/x"),
        ("cp", "/no/such/file", "{box}:/config/"),
        ("pull", "{box}", "/etc/hostname", "--to", "/no/such/dir/f"),
        ("cp", "{box}:/etc/hostname", "/no/such/dir/f"),
        ("pull", "{box}", "/config/no-such-file"),
        ("screenshot", "{box}", "-o", "/no/such/dir/shot.png"),
    ],
    ids=" ".join,
)
def test_paths_that_do_not_exist_are_one_line(
    server: Server, tmp_path: Path, box: str, args: tuple[str, ...]
) -> None:
    done = run(server, tmp_path, *(a.format(box=box) for a in args))
    assert done.returncode == 1, done.stderr
    short(done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("options", "cmd", "code", "says"),
    [
        ([], ["nosuchprog"], 127, "nosuchprog: command not found"),
        ([], ["/no/such/prog"], 127, "/no/such/prog: no such file or directory"),
        ([], ["/tmp"], 126, "/tmp: permission denied"),
        (["-w", "/nope"], ["ls"], 126, "cannot use /nope as the working directory"),
        (["-w", "/etc/passwd"], ["ls"], 126, "cannot use /etc/passwd as the working directory"),
        (["-u", "nobodyx"], ["ls"], 126, "no user nobodyx in the box"),
        (["-t"], ["nosuchprog"], 127, "nosuchprog: command not found"),
        (["-d"], ["nosuchprog"], 127, "nosuchprog: command not found"),
        (["-d", "-w", "/nope"], ["ls"], 126, "cannot use /nope as the working directory"),
    ],
)
def test_a_command_that_cannot_run_says_why_in_one_line(
    server: Server, box: str, options: list[str], cmd: list[str], code: int, says: str
) -> None:
    done = server.cli("exec", *options, box, "--", *cmd)
    assert done.returncode == code, done.stderr + done.stdout
    said = (done.stderr + done.stdout).strip()
    assert said.startswith(says) and len(said.splitlines()) == 1, said
    assert "OCI runtime" not in said


def test_a_bad_program_through_the_sdk_is_the_same(server: Server, box: str) -> None:
    with server.client() as c:
        result = c.exec(box, ["nosuchprog"])
    assert result.exit_code == 127
    assert result.stderr == "nosuchprog: command not found\n" and result.stdout == ""


def test_settings_that_cannot_be_saved_are_one_line(
    server: Server, tmp_path: Path, box: str
) -> None:
    done = run(server, tmp_path, "use", box, PADDOCK_CONFIG=os.devnull + "/cli.json")
    assert done.returncode == 1
    short(done.stderr)
