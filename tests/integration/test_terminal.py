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


def test_a_client_that_leaves_at_once_is_no_error_in_the_log(server: Server, box: str) -> None:
    # Tabs closed mid-handshake, refusals nobody waited for (a stopped box), sessions
    # dropped while they stream: each ends quietly, with no traceback in paddockd's log.
    import json

    from websockets.sync.client import connect

    log = server.dir / "paddockd.log"
    before = log.read_text(errors="replace").count("Traceback")
    with server.client() as c:
        c.create_box("leaves-stopped")
        c.stop_box("leaves-stopped")
    base = server.url.replace("http://", "ws://") + "/v1/boxes"
    headers = {"Authorization": f"Bearer {server.token}"}
    firsts = {
        "terminal/ws": json.dumps({"key": "gone", "cols": 80, "rows": 24}),
        "exec/ws": json.dumps({"cmd": ["cat"], "tty": True}),
    }
    for target in (box, "leaves-stopped"):
        for wait in (0.0, 0.05, 0.5):
            for path, first in firsts.items():
                with connect(f"{base}/{target}/{path}", additional_headers=headers) as ws:
                    ws.send(first)
                    time.sleep(wait)
    time.sleep(1)
    text = log.read_text(errors="replace")
    assert text.count("Traceback") == before, text[-4000:]
    with server.client() as c:
        c.delete_box("leaves-stopped", force=True)
