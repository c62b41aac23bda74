"""What the CLI does and says around a box's life: fork leaves `current` alone, stop names
its snapshot, a TTL stop says why, resume of a running box, allowlist edits."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import PADDOCK, Server

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(server: Server, tmp_path: Path) -> Iterator[Cli]:
    """The real CLI with settings of this test's own, so its `current` is its own."""
    settings = tmp_path / "cli.json"

    def run(*args: str, stdin: str | None = None, check: bool = False) -> Any:
        done = subprocess.run(
            [PADDOCK, *args],
            env={**server.env, "PADDOCK_CONFIG": str(settings)},
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert done.returncode == 0, f"paddock {' '.join(args)}: {done.stderr}"
        return done

    yield run


def current(cli_settings: Path) -> str | None:
    value: str | None = json.loads(cli_settings.read_text()).get("current")
    return value


def names_no_box_current(text: str) -> None:
    """`current` is how a user names a box, never how Paddock does (it says which)."""
    assert not re.search(r"\bcurrent\b(?! box)", text), text


@pytest.fixture
def named(cli: Cli, server: Server) -> Iterator[Callable[[str], str]]:
    made: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        made.append(name)
        return name

    yield make
    with server.client() as c:
        for name in made:
            with contextlib.suppress(Exception):  # the test may have deleted it
                c.delete_box(name, force=True)


def test_fork_leaves_current_alone_and_says_how_to_switch(
    cli: Cli, named: Callable[[str], str], tmp_path: Path
) -> None:
    source, fork = named("src"), named("fork")
    cli("new", "--name", source, "--ttl", "600", check=True)
    forked = cli("fork", "current", "--name", fork, check=True)
    assert forked.stdout.strip() == fork
    assert current(tmp_path / "cli.json") == source
    assert f"forked from {source}" in forked.stderr
    assert f"paddock use {fork}" in forked.stderr
    names_no_box_current(forked.stderr)


def test_stop_names_its_snapshot_and_resume_knows_a_running_box(
    cli: Cli, named: Callable[[str], str]
) -> None:
    box = named("stop")
    cli("new", "--name", box, "--ttl", "600", check=True)
    # A deleted snapshot makes the new one's id differ from the count of snapshots.
    cli("snapshot", box, "--name", "first", check=True)
    cli("snapshot", box, "--name", "second", check=True)
    cli("snapshots", "rm", box, "first", check=True)
    again = cli("resume", "current", check=True)
    assert again.stderr.strip() == f"box {box} is already running"
    stopped = cli("stop", "current", check=True)
    snaps = json.loads(cli("snapshots", box, "--json", check=True).stdout)
    made = next(s for s in snaps if s["current"])
    assert made["kind"] == "stop" and made["id"] == 3 and len(snaps) == 2
    assert f"box {box} stopped; snapshot {made['id']} keeps its files" in stopped.stderr
    twice = cli("stop", box, check=True)
    assert f"box {box} was already stopped; snapshot {made['id']}" in twice.stderr
    resumed = cli("resume", box, check=True)
    assert resumed.stderr.strip() == f"box {box} is running"
    for done in (stopped, twice, resumed):
        names_no_box_current(done.stderr)


def test_a_ttl_stop_says_why(cli: Cli, named: Callable[[str], str]) -> None:
    box = named("ttl")
    cli("new", "--name", box, "--ttl", "2", check=True)
    deadline = time.monotonic() + 120
    while json.loads(cli("show", box, "--json", check=True).stdout)["state"] != "stopped":
        assert time.monotonic() < deadline, "the TTL never stopped the box"
        time.sleep(1)
    shown = cli("show", box, check=True).stdout
    assert re.search(r"note:\s+stopped by its TTL at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown)
    assert re.search(r"expires:\s+2s after it resumes \(stop\)", shown), shown
    cli("resume", box, check=True)
    assert "note:" not in cli("show", box, check=True).stdout


def test_allowlist_remove_normalizes_and_names_what_is_missing(
    cli: Cli, named: Callable[[str], str]
) -> None:
    box = named("net")
    cli("new", "--name", box, "--ttl", "600", check=True)
    cli("network", box, "allow", "198.18.9.9", "Example.COM.", check=True)
    removed = cli("network", "current", "allow", "--remove", "198.18.9.9", check=True)
    assert removed.stdout.strip() == "allowlist: example.com"
    missing = cli("network", "current", "allow", "--remove", "198.18.9.9")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"paddock: not in the allowlist of box {box}: 198.18.9.9/32 (it has: example.com)"
    )
    assert json.loads(cli("network", box, "--json", check=True).stdout)["allow"] == ["example.com"]


def test_ls_quiet_and_several_boxes_at_once(cli: Cli, named: Callable[[str], str]) -> None:
    a, b = named("many"), named("many")
    for name in (a, b):
        cli("new", "--name", name, "--ttl", "600", check=True)
    listed = cli("ls", "-q", check=True).stdout.split()
    assert {a, b} <= set(listed) and all(" " not in n for n in listed)
    stopped = cli("stop", a, "nosuchbox", b)
    assert stopped.returncode == 1  # one failed; the others still had their turn
    assert f"box {a} stopped" in stopped.stderr and f"box {b} stopped" in stopped.stderr
    assert "no box named or with id 'nosuchbox'" in stopped.stderr
    resumed = json.loads(cli("resume", a, b, "--json", check=True).stdout)
    assert [r["name"] for r in resumed] == [a, b] and {r["state"] for r in resumed} == {"running"}
    removed = cli("rm", "-f", a, b, check=True)
    assert removed.stderr.split("\n")[:2] == [f"box {a} deleted", f"box {b} deleted"]
    assert not {a, b} & set(cli("ls", "-q", check=True).stdout.split())


def test_exec_detached_returns_at_once_with_the_pid(
    cli: Cli, server: Server, named: Callable[[str], str]
) -> None:
    box = named("bg")
    cli("new", "--name", box, "--ttl", "600", check=True)
    started = time.monotonic()
    done = cli("exec", "-d", box, "--", "sh", "-c", "echo started; sleep 300", check=True)
    assert time.monotonic() - started < 30  # not the 300 s the command takes
    pid = done.stdout.strip()
    assert pid.isdigit(), done.stdout
    log = re.search(r"its output goes to (/tmp/paddock-exec-\S+\.log)", done.stderr)
    assert log, done.stderr
    # Still running after the exec that started it ended, in a session of its own.
    state = server.sh(box, f"ps -o sid=,args= -p {pid}; cat {log[1]}")
    assert f"{pid} sh -c echo started; sleep 300" in " ".join(state.split())
    assert "started" in state.splitlines()[-1]
    server.sh(box, f"kill {pid}")


def test_logs_show_what_the_box_itself_wrote(
    cli: Cli, server: Server, named: Callable[[str], str]
) -> None:
    box = named("logs")
    cli("new", "--name", box, "--ttl", "600", check=True)
    # What the box's init writes reaches the container's log: write as it would.
    # (stdout and stderr are two pipes: the pause keeps their lines in this order.)
    script = "echo first-line > /proc/1/fd/2; sleep 1; echo last-line > /proc/1/fd/1"
    server.sh(box, script, user="root")
    logs = cli("logs", box, check=True).stdout
    assert "first-line" in logs and "last-line" in logs
    assert cli("logs", "-n", "1", box, check=True).stdout == "last-line\n"
    with server.client() as c:
        assert "first-line" in c.box_logs(box)


def test_version_names_both_ends(cli: Cli) -> None:
    from paddock import __version__

    out = cli("version", check=True).stdout.splitlines()
    assert out[0] == f"paddock {__version__}"
    assert out[1].startswith("paddockd ") and " at http://127.0.0.1:" in out[1]
