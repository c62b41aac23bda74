"""`exec -t` through a real pseudo-terminal: a TTY in the box, its size, Ctrl-C."""

from __future__ import annotations

import os
import pty
import select
import struct
import subprocess
import termios
import time
from fcntl import ioctl

from .conftest import PADDOCK, Server


def run_in_pty(
    server: Server, args: list[str], keys: bytes = b"", after: bytes = b"READY", wait: float = 20.0
) -> tuple[int, str]:
    master, slave = pty.openpty()
    ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    proc = subprocess.Popen(
        [PADDOCK, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=server.env,
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if keys and not sent and after in out:
            os.write(master, keys)
            sent = True
        if proc.poll() is not None and not ready:
            break
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = -1
    os.close(master)
    return code, out.decode(errors="replace")


def test_tty_exec_sees_a_terminal_of_our_size(server: Server, box: str) -> None:
    code, out = run_in_pty(server, ["exec", "-t", box, "--", "sh", "-c", "tty; stty size"])
    assert code == 0, out
    assert "/dev/pts/" in out and "33 111" in out


def test_ctrl_c_reaches_the_command_in_the_box(server: Server, box: str) -> None:
    started = time.monotonic()
    code, out = run_in_pty(
        server, ["exec", "-t", box, "--", "sh", "-c", "echo READY; sleep 60"], keys=b"\x03"
    )
    assert time.monotonic() - started < 15, out
    assert code == 130, out  # the box's shell died of SIGINT


def test_shell_runs_commands_typed_into_it(server: Server, box: str) -> None:
    keys = b"echo OK-$((6*7)); exit 7\n"
    code, out = run_in_pty(server, ["shell", box], keys=keys, after=b"$ ")
    assert "OK-42" in out and code == 7, out
