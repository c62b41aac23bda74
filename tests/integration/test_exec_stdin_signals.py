"""`paddock exec` as a shell user expects it: a pipe's data reaches the command without
`-i`, `-n` keeps it away, and a signal to `paddock exec` ends the command in the box."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import PADDOCK, Server


def test_piped_stdin_reaches_the_command(server: Server, box: str) -> None:
    done = subprocess.run(
        [PADDOCK, "exec", box, "--", "sh", "-c", "cat > /tmp/in; wc -c < /tmp/in"],
        input=b"hello from a pipe\n",
        env=server.env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == b"18"
    done = subprocess.run(
        [PADDOCK, "exec", "-n", box, "--", "sh", "-c", "cat | wc -c"],
        input=b"ignored",
        env=server.env,
        capture_output=True,
        timeout=60,
    )
    assert done.stdout.strip() == b"0"


def _sleeping(server: Server, box: str, marker: str, sigint: Any) -> subprocess.Popen[bytes]:
    """`paddock exec BOX -- sh -c 'sleep MARKER & sleep MARKER; wait'`, started with SIGINT
    as `sigint` has it (a handler here is none in the child; SIG_IGN stays ignored), once
    its sleeps run in the box."""
    held = signal.signal(signal.SIGINT, sigint)
    try:
        proc = subprocess.Popen(
            [PADDOCK, "exec", box, "--", "sh", "-c", f"sleep {marker} & sleep {marker}; wait"],
            env=server.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    finally:
        signal.signal(signal.SIGINT, held)
    deadline = time.monotonic() + 20
    while server.cli("exec", box, "--", "pgrep", "-f", f"sleep {marker}").returncode != 0:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.2)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_command_in_the_box(server: Server, box: str, sig: int) -> None:
    marker = f"{300 + sig}"
    # As from a terminal: a suite started in the background (`./scripts/test &` in a
    # script) ignores SIGINT and SIGQUIT, and `paddock exec` keeps what it is started
    # ignoring (as `nohup` would have it).
    proc = _sleeping(server, box, marker, signal.default_int_handler)
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        # Rare under the full suite: what each CLI process (the launcher, the resident and
        # its children) was doing, for the report.
        ps = ["ps", "-eo", "pid,ppid,stat,wchan:24,etime,args", "--sort", "pid"]
        listing = subprocess.run(ps, capture_output=True, text=True).stdout
        mine = [
            line for line in listing.splitlines() if "paddock" in line and "paddockd" not in line
        ]
        for line in list(mine):
            pid = line.split()[0]
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                mine.append(pid + " " + " ".join(x for x in status if x.startswith("Sig")))
        proc.kill()
        pytest.fail(
            f"paddock exec outlived its {signal.Signals(sig).name} by 20 s:\n" + "\n".join(mine)
        )
    assert code == 128 + sig
    deadline = time.monotonic() + 10
    while server.cli("exec", box, "--", "pgrep", "-f", f"sleep {marker}").returncode == 0:
        assert time.monotonic() < deadline, "the command outlived paddock exec"
        time.sleep(0.2)


def test_a_signal_ignored_from_the_start_stays_ignored(server: Server, box: str) -> None:
    """`nohup paddock exec ...`, or one in a script's background job: SIGINT does not end
    it, whether it runs in the resident CLI process (the second time here) or in its own
    (the first, which may start the resident); SIGTERM still does."""
    for run in range(2):
        marker = f"{400 + run}"
        proc = _sleeping(server, box, marker, signal.SIG_IGN)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert proc.poll() is None, f"run {run}: an ignored SIGINT ended paddock exec"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
