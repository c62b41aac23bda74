"""A hostile box against its exec agent (runtime/agent.py): the agent serves paddockd
alone (not the box's users, not even its root), what the box puts in place of the
agent's socket is never followed past the box, and an agent the box forges fools only
that box's own commands: paddockd and every other box go on."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from paddockd.runtime.agent import SOCKET_NAME

from ..conftest import Server
from .test_push_feed import _run_folder

IN_BOX = f"/run/paddock/{SOCKET_NAME}"

# From inside the box: connect, then ask for a command with pipes, as paddockd would.
ASK = """
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(type(exc).__name__); sys.exit()
body = json.dumps({"argv": ["touch", "/tmp/agent-obeyed"], "env": {}, "user": "root",
                   "cwd": "/"}).encode()
r, w = os.pipe()
try:
    socket.send_fds(s, [struct.pack("!I", len(body))], [r, w])
    s.sendall(body)
    s.settimeout(10)
    print("answered" if s.recv(5) else "hung up")
except OSError:
    print("hung up")
"""

# A forged agent: it takes the name and answers every request with an exit of its own.
FORGED = """
import os, socket, struct, sys
path = sys.argv[1]
os.unlink(path)
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(8)
if os.fork():
    os._exit(0)
while True:
    conn, _ = srv.accept()
    try:
        head, fds, _, _ = socket.recv_fds(conn, 4, 3)
        conn.recv(struct.unpack("!I", head)[0], socket.MSG_WAITALL)
        conn.sendall(struct.pack("!Bi", 1, 0))
        os.write(fds[-2], b"forged\\n")
        for fd in fds:
            os.close(fd)
        conn.sendall(struct.pack("!Bi", 3, 42) + os.urandom(1 << 20))
    except OSError:
        pass
    conn.close()
"""


def _agent_up(server: Server, box: str) -> None:
    server.sh(box, "true")  # the box's first two commands go to the engine, and then its
    server.sh(box, "true")  # agent is started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.sh(box, f"test -S {IN_BOX} && echo up || true", user="root").strip() == "up":
            return
        time.sleep(0.2)
    raise AssertionError("the box's exec agent did not start")


def _stop_agent(server: Server, box: str) -> None:
    # Its exit code is unknown (-1) when the agent that started it is what it kills.
    server.cli("exec", "-u", "root", box, "--", "pkill", "-x", "paddock-agent")


def test_only_paddockd_is_served(server: Server, box: str) -> None:
    _agent_up(server, box)
    ask = ["exec", box, "--", "python3", "-c", ASK, IN_BOX]
    assert server.cli(*ask[:1], "-u", "abc", *ask[1:], check=True).stdout.strip() == (
        "PermissionError"
    )
    # The box's root connects (the socket is its), but is no peer outside the box.
    assert server.cli(*ask[:1], "-u", "root", *ask[1:], check=True).stdout.strip() == "hung up"
    assert server.sh(box, "ls /tmp/agent-obeyed 2>/dev/null || echo none").strip() == "none"
    assert server.sh(box, "echo still served").strip() == "still served"


def test_a_planted_name_never_reaches_past_the_box(
    server: Server, box: str, tmp_path: Path
) -> None:
    _agent_up(server, box)
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(str(tmp_path / "host.sock"))  # a host socket the box names
    host.listen(8)
    host.setblocking(False)
    try:
        _stop_agent(server, box)
        for plant in (f"ln -sfn {tmp_path}/host.sock", "mkfifo", "touch"):
            server.sh(box, f"rm -f {IN_BOX}; {plant} {IN_BOX}", user="root")
            assert server.sh(box, "echo $((6 * 7))").strip() == "42"  # the engine's exec
            try:
                host.accept()
                raise AssertionError(f"paddockd connected past the box ({plant})")
            except BlockingIOError:
                pass
        run = _run_folder(server, box)
        assert not (run / SOCKET_NAME).is_socket()
    finally:
        host.close()


def test_a_forged_agent_fools_only_its_own_box(server: Server, box: str, other_box: str) -> None:
    _agent_up(server, box)
    _agent_up(server, other_box)
    _stop_agent(server, box)
    server.cli("exec", "-u", "root", box, "--", "python3", "-c", FORGED, IN_BOX, check=True)
    forged = server.cli("exec", box, "--", "echo", "real")
    assert (forged.returncode, forged.stdout) == (42, "forged\n")  # the box's own lie
    # Another box, and paddockd, go on as before.
    assert server.sh(other_box, "echo real").strip() == "real"
    with server.client() as c:
        assert c.get_box(other_box).state == "running"
        assert c.health()["status"] == "ok"
