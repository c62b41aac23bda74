"""No traceback reaches a user, and each failure exits with its documented code: every
command of the parser with bad arguments, without a server, and without a terminal."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from paddock.cli.main import main

from ...cli_commands import runnable

# PADDOCK_TEST_CLI: another install's CLI (e.g. a second worktree's venv).
PADDOCK = os.environ.get("PADDOCK_TEST_CLI") or str(Path(sys.executable).parent / "paddock")
# Commands that never need the server: they succeed without one.
LOCAL = {("help",), ("completion", "bash"), ("version",), ("skill",), ("mcp",), ("e2b", "env")}
# What the others exit with when the server is missing (default: 1, a Paddock error).
NO_SERVER = {
    ("exec", "nosuchbox", "--", "true"): 125,  # as `docker exec` when Docker fails
    ("shell",): 125,
    ("auth", "set", "anthropic"): 2,  # asks for the key first, and there is no terminal
    ("secret", "set", "drive1", "--host", "x"): 2,  # the same for the value
    ("template", "rebuild"): 2,  # a name or --all: a usage mistake before any request
    ("prompt", "nosuchbox"): 2,  # the instruction comes from stdin, which is empty
    ("host", "x"): 2,  # one word is neither BOX PORT nor a subcommand: a usage mistake
    ("ssh-key", "add"): 2,  # the key file is read first (no ~/.ssh/id_ed25519.pub here)
    ("forward", "nosuchbox", "x"): 2,  # "x" is no [LOCAL:]PORT
}


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed once the socket is


def short(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.strip(), "a failure says why"
    assert len(stderr.strip().splitlines()) <= 3, stderr


def run(args: tuple[str, ...], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PADDOCK, *args],
        env={
            **os.environ,
            "PADDOCK_CONFIG": str(tmp_path / "cli.json"),
            "HOME": str(tmp_path),
            **env,
        },
        stdin=subprocess.DEVNULL,  # no terminal, and nothing to read
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("args", runnable(), ids=" ".join)
def test_a_missing_server_is_one_message(args: tuple[str, ...], tmp_path: Path) -> None:
    done = run(args, tmp_path, PADDOCK_URL=closed_url(), PADDOCK_TOKEN="t0ken")
    if args in LOCAL:
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return
    assert done.returncode == NO_SERVER.get(args, 1), done.stderr
    short(done.stderr)


@pytest.mark.parametrize("args", runnable(), ids=" ".join)
def test_bad_arguments_are_usage_errors(
    args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*args[:1], "--no-such-flag", *args[1:]])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    short(err)
    assert "--help" in err  # where to read what is right


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["new", "--ttl", "-5"], "invalid TTL '-5'"),
        (["new", "--ttl", "abc"], "invalid TTL 'abc'"),
        (["extend", "b", "--ttl", "5x"], "invalid TTL '5x'"),
        (["logs", "b", "--tail", "-1"], "not a whole number"),
        (["exec", "--wait", "b", "--", "true"], "--wait goes with --desktop"),
        (["exec", "b"], "no command given"),
        (["exec", "-e", "NOVALUE", "b", "--", "env"], "--env takes KEY=VALUE"),
        (["exec", "-d", "-t", "b", "--", "top"], "-d runs the command without a terminal"),
        (["network", "b", "nonsense"], "invalid choice: 'nonsense'"),
        (["network", "b", "deny-all", "1.2.3.4"], "deny-all takes no targets"),
        (["network", "b", "--add", "x"], "targets need a mode"),
        (["snapshots", "rm", "b"], "required: SNAP"),
        (["desktop", "b", "click", "1"], "click X Y"),
        (["completion", "tcsh"], "invalid choice: 'tcsh'"),
        (["help", "nope"], "no command `paddock nope`"),
        (["login", "http://127.0.0.1:9", "--with-token"], "--token-stdin"),
        (["auth", "set", "openai"], "--from-stdin"),
        (["prompt", "b"], "the instruction is empty"),
    ],
)
def test_usage_errors_exit_2_with_one_message(
    argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing here may reach a server: a closed port proves it.
    monkeypatch.setenv("PADDOCK_URL", closed_url())
    monkeypatch.delenv("PADDOCK_TOKEN", raising=False)
    monkeypatch.setenv("PADDOCK_CONFIG", str(tmp_path / "cli.json"))
    done = run(tuple(argv), tmp_path, PADDOCK_URL=closed_url())
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    short(done.stderr)


def test_a_local_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    # The settings file's folder cannot be made: `use` fails before it asks anything.
    done = run(
        ("use", "b"), tmp_path, PADDOCK_CONFIG="/proc/nope/cli.json", PADDOCK_URL=closed_url()
    )
    assert done.returncode == 1
    short(done.stderr)


def test_a_reader_that_goes_away_is_no_error(tmp_path: Path) -> None:
    # `paddock ... | head`: the pipe is closed before paddock writes its first byte.
    proc = subprocess.Popen(
        [PADDOCK, "completion", "bash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PADDOCK_CONFIG": str(tmp_path / "cli.json")},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err  # 128 + SIGPIPE, as a shell reports it
    assert err == ""
