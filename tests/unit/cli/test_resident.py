"""The resident CLI process (paddock/_launch.py, paddock/cli/resident.py): a command handed
to it behaves as the same command run in its own interpreter (output, exit code, stdin,
environment, signals), and nothing but this user's own folder is ever used for it.

Each test gets a runtime folder of its own, so a resident of its own; whether a command
went through the resident is read from the launcher's own imports (`-X importtime`: a
launcher that ran the command itself imported the CLI)."""

from __future__ import annotations

import marshal
import os
import pty
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import Client
from paddock._launch import ANSWER_SECONDS, PROTOCOL, socket_path

from ..conftest import World, serve_api

LAUNCH = "import sys; from paddock._launch import run; sys.argv[0] = 'paddock'; run()"
# Ctrl-C as a terminal's foreground job has it: the suite's runner may start these tests
# as a background job, whose children inherit SIGINT ignored (and keep it ignored).
INTERRUPTIBLE = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[dict[str, str]]:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PADDOCK_")}
    env["XDG_RUNTIME_DIR"] = str(folder)
    yield env
    for pid in _residents(folder):
        os.kill(pid, signal.SIGTERM)


def _residents(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"paddock.cli.resident" in argv and any(str(folder).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def paddock(
    env: dict[str, str], *args: str, stdin: bytes = b"", resident: bool = True
) -> tuple[int, bytes, bytes, bool]:
    """(exit code, stdout, stderr, whether the resident ran it)."""
    run_env = {**env, "PADDOCK_RESIDENT": "1" if resident else "0"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", LAUNCH, *args],
        input=stdin,
        capture_output=True,
        env=run_env,
        timeout=60,
    )
    err = b"\n".join(ln for ln in done.stderr.splitlines() if not ln.startswith(b"import time:"))
    ran_here = b"paddock.cli.main" in done.stderr
    return done.returncode, done.stdout, err, not ran_here


def started(env: dict[str, str]) -> None:
    """Start a resident (the first command does) and wait until it answers."""
    paddock(env, "--version")
    path = socket_path_for(env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                time.sleep(0.05)
    raise AssertionError("no resident answered")


def socket_path_for(env: dict[str, str]) -> str:
    old = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
    try:
        return socket_path()
    finally:
        if old is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = old


def test_commands_through_the_resident_answer_as_run_here(runtime: dict[str, str]) -> None:
    started(runtime)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the CLI's connection error
    for args in (
        ["--version"],
        ["frobnicate"],
        ["help", "exec"],
        ["--url", f"http://127.0.0.1:{port}", "ls"],
    ):
        here = paddock(runtime, *args, resident=False)
        there = paddock(runtime, *args)
        assert not here[3] and there[3], args  # each went where it was sent
        assert there[:3] == here[:3], args


def test_stdin_environment_and_output_reach_the_command(
    world: World, runtime: dict[str, str], tmp_path: Path
) -> None:
    started(runtime)
    with serve_api(world) as port:
        url = f"http://127.0.0.1:{port}"
        with Client(url, token=world.token) as c:
            c.create_box(name="b")
        env = {**runtime, "PADDOCK_URL": url, "PADDOCK_TOKEN": world.token}
        env["PADDOCK_CONFIG"] = str(tmp_path / "cli.json")
        args = ("exec", "b", "--", "cat")
        here = paddock(env, *args, stdin=b"hello\n", resident=False)
        there = paddock(env, *args, stdin=b"hello\n")
    assert there[3] and there[:3] == here[:3]
    assert there[0] == 0


def test_a_signal_to_the_launcher_reaches_the_command(runtime: dict[str, str]) -> None:
    started(runtime)
    with socket.socket() as silent:  # takes the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-c", INTERRUPTIBLE + LAUNCH, "--url", url, "ls"],
            env={**runtime, "PADDOCK_TOKEN": "x"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        held, _ = silent.accept()  # the command is waiting for its answer now
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        held.close()
    assert proc.returncode == 130 and b"paddock: interrupted" in err
    assert b"paddock.cli.main" not in err  # the resident ran it


def test_a_folder_others_can_enter_is_never_used(runtime: dict[str, str]) -> None:
    folder = Path(runtime["XDG_RUNTIME_DIR"]) / f"paddock-cli-{os.getuid()}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for _ in range(3):
        code, out, _, resident = paddock(runtime, "--version")
        assert code == 0 and out.startswith(b"paddock ") and not resident
    time.sleep(0.5)
    assert list(folder.iterdir()) == []  # no resident made its socket there


def test_a_command_typed_at_a_terminal_runs_in_its_own_process(runtime: dict[str, str]) -> None:
    started(runtime)
    master, slave = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", LAUNCH, "--version"],
            stdin=slave,
            capture_output=True,
            env=runtime,
            timeout=60,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0 and done.stdout.startswith(b"paddock ")
    assert b"paddock.cli.main" in done.stderr  # job control and prompts stay the terminal's


def test_a_signal_the_launcher_ignores_the_command_ignores(runtime: dict[str, str]) -> None:
    started(runtime)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        nohup = INTERRUPTIBLE + "signal.signal(signal.SIGHUP, signal.SIG_IGN); " + LAUNCH
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-c", nohup, "--url", url, "ls"],
            env={**runtime, "PADDOCK_TOKEN": "x"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        held, _ = silent.accept()
        proc.send_signal(signal.SIGHUP)  # ignored by both
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        held.close()
    assert proc.returncode == 130 and b"paddock.cli.main" not in err


def test_a_resident_answering_too_late_never_runs_the_command(runtime: dict[str, str]) -> None:
    # A resident still loading (a busy machine) offers to run the command after the
    # launcher stopped waiting for it: the launcher ran it itself, and must not say go.
    path = socket_path_for(runtime)
    os.makedirs(os.path.dirname(path), mode=0o700)
    heard: list[bytes] = []
    with socket.socket(socket.AF_UNIX) as late:
        late.bind(path)
        late.listen()

        def answer_late() -> None:
            conn, _ = late.accept()
            with conn:
                conn.recv(1 << 20)
                time.sleep(ANSWER_SECONDS + 1)
                try:
                    conn.sendall(b"R")
                    conn.settimeout(10)
                    heard.append(conn.recv(1))
                except BrokenPipeError:
                    heard.append(b"")  # the launcher had gone

        waiter = threading.Thread(target=answer_late)
        waiter.start()
        code, out, _, resident = paddock(runtime, "--version")
        waiter.join(timeout=20)
    assert code == 0 and out.startswith(b"paddock ") and not resident
    assert heard == [b""]  # no go: the launcher had closed the connection


def test_a_command_the_launcher_does_not_confirm_never_runs(runtime: dict[str, str]) -> None:
    started(runtime)
    out_r, out_w = os.pipe()
    # A command that would outlive its launcher (SIGHUP ignored, as under `nohup`).
    nohup = [int(signal.SIGHUP)]
    request = marshal.dumps((PROTOCOL, ["paddock", "--version"], runtime, "/", 0o022, nohup))
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(socket_path_for(runtime))
        fds = struct.pack("3i", 0, out_w, 2)
        conn.sendmsg(
            [len(request).to_bytes(4, "big") + request],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
        )
        os.close(out_w)
        conn.settimeout(10)
        assert conn.recv(1) == b"R"  # offered; the launcher leaves without its go
        time.sleep(0.5)  # (long enough for a command started anyway to write)
    with os.fdopen(out_r, "rb") as out:
        assert out.read() == b""  # the resident let go of the output, nothing written
