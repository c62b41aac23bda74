"""`paddock exec` as a shell user expects it: a pipe's data reaches the command without
`-i`, `-n` keeps it away, and a signal to `paddock exec` ends the command in the box."""

from __future__ import annotations

import signal
import subprocess
import time

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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_command_in_the_box(server: Server, box: str, sig: int) -> None:
    marker = f"{300 + sig}"
    proc = subprocess.Popen(
        [PADDOCK, "exec", box, "--", "sh", "-c", f"sleep {marker} & sleep {marker}; wait"],
        env=server.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while server.cli("exec", box, "--", "pgrep", "-f", f"sleep {marker}").returncode != 0:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.2)
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
        proc.kill()
        pytest.fail(
            f"paddock exec outlived its {signal.Signals(sig).name} by 20 s:\n" + "\n".join(mine)
        )
    assert code == 128 + sig
    deadline = time.monotonic() + 10
    while server.cli("exec", box, "--", "pgrep", "-f", f"sleep {marker}").returncode == 0:
        assert time.monotonic() < deadline, "the command outlived paddock exec"
        time.sleep(0.2)
