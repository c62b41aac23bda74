"""SSH into a real box with Debian's OpenSSH client through `paddock ssh-config`: a command
and its exit code, scp and sftp of 50 MB both ways, rsync, ssh -L to a server in the box,
a session on a pty, `paddock forward`; the box's host key pinned (a changed one refused);
no token, a wrong one or another user's reaches no sshd, and nothing in any box listens
for SSH."""

from __future__ import annotations

import hashlib
import os
import pty
import select
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import Client

from .conftest import PADDOCK, Server
from .test_members import create_owner, member_token

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")


@pytest.fixture(scope="module")
def box(server: Server) -> Iterator[str]:
    name = f"ssh-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--ttl", "1800", check=True)
    yield name
    server.cli("rm", "--force", name)


@pytest.fixture(scope="module")
def config(server: Server, box: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    done = subprocess.run(
        [PADDOCK, "ssh-config", box, "--write"],
        env={**server.env, "HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "now includes" in done.stderr
    path = server.cli_config.parent / "ssh" / "config"
    assert f"Include {path}" in (home / ".ssh" / "config").read_text()
    return path


def ssh(server: Server, config: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(config), *args],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        **kw,  # type: ignore[call-overload]
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_command_its_output_and_exit_code(server: Server, box: str, config: Path) -> None:
    done = ssh(server, config, f"paddock-{box}", "echo $(whoami)@$(hostname); exit 7")
    assert (done.returncode, done.stdout) == (7, f"abc@{box}\n"), done.stderr
    root = ssh(server, config, "-l", "root", f"paddock-{box}", "whoami")
    assert root.stdout == "root\n", root.stderr
    # `paddock ssh` itself, the same way (the command is a shell line, as ssh sends it).
    direct = server.cli("ssh", box, "--", "exit 4")
    assert direct.returncode == 4, direct.stderr


def test_files_both_ways(server: Server, box: str, config: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(50 << 20))
    host = f"paddock-{box}"
    up = subprocess.run(["scp", "-F", str(config), str(big), f"{host}:/config/big.bin"],
                        env=server.env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert up.returncode == 0, up.stderr
    inside = ssh(server, config, host, "sha256sum /config/big.bin").stdout.split()[0]
    assert inside == sha256(big)
    back = tmp_path / "back.bin"
    batch = f"get /config/big.bin {back}\n"
    got = subprocess.run(["sftp", "-q", "-F", str(config), "-b", "-", host], input=batch,
                         env=server.env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert got.returncode == 0 and sha256(back) == sha256(big), got.stderr
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    for i in range(20):
        (tree / "sub" / f"f{i}.txt").write_text(f"file {i}\n")
    rsh = f"ssh -F {config}"
    synced = subprocess.run(["rsync", "-a", "-e", rsh, f"{tree}/", f"{host}:/config/tree/"],
                            env=server.env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert synced.returncode == 0, synced.stderr
    listed = ssh(server, config, host, "cat /config/tree/sub/f7.txt; ls /config/tree/sub | wc -l")
    assert listed.stdout == "file 7\n20\n"


def _get(url: str, deadline: float = 20.0) -> bytes:
    end = time.monotonic() + deadline
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:  # loopback only
                return bytes(answer.read())
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ports_reach_a_server_in_the_box(server: Server, box: str, config: Path) -> None:
    server.sh(box, "mkdir -p /tmp/www && echo served > /tmp/www/index.html")
    server.sh(box, "cd /tmp/www && (setsid python3 -m http.server 8765 >/dev/null 2>&1 &)")
    local = free_port()
    tunnel = subprocess.Popen(
        [
            "ssh",
            "-F",
            str(config),
            "-N",
            "-L",
            f"127.0.0.1:{local}:127.0.0.1:8765",
            f"paddock-{box}",
        ],
        env=server.env,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert _get(f"http://127.0.0.1:{local}/") == b"served\n"
    finally:
        tunnel.terminate()
        tunnel.wait(10)
    local = free_port()
    forward = subprocess.Popen(
        [PADDOCK, "forward", box, f"{local}:8765"], env=server.env, stdin=subprocess.DEVNULL
    )
    try:
        assert _get(f"http://127.0.0.1:{local}/") == b"served\n"
        assert _get(f"http://127.0.0.1:{local}/") == b"served\n"  # a second connection
    finally:
        forward.terminate()
        forward.wait(10)


def test_a_session_on_a_pty(server: Server, box: str, config: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: ssh with a terminal of its own
        os.execvpe("ssh", ["ssh", "-F", str(config), "-tt", f"paddock-{box}"], server.env)
    seen = b""
    try:
        os.write(fd, b"tty; echo $((6 * 7))-cols-$(tput cols); exit 0\n")
        end = time.monotonic() + 30
        while b"42-cols-" not in seen and time.monotonic() < end:
            if select.select([fd], [], [], 1)[0]:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    assert b"/dev/pts/" in seen and b"42-cols-" in seen, seen


def test_a_changed_host_key_is_refused(server: Server, config: Path) -> None:
    name = f"ssh-k-{uuid.uuid4().hex[:4]}"
    server.cli("new", "--name", name, "--ttl", "600", check=True)
    try:
        server.cli("ssh-config", name, check=True)
        assert ssh(server, config, f"paddock-{name}", "true").returncode == 0
        with server.client() as c:
            box_id = c.get_box(name).id
        with sqlite3.connect(server.dir / "data" / "paddock.db") as db:
            db.execute("DELETE FROM box_ssh WHERE box_id = ?", (box_id,))  # a new key next
        refused = ssh(server, config, f"paddock-{name}", "true")
        assert refused.returncode == 255
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in refused.stderr
    finally:
        server.cli("rm", "--force", name)


def test_only_the_token_holder_reaches_an_sshd(server: Server, config: Path) -> None:
    name = f"ssh-t-{uuid.uuid4().hex[:4]}"
    server.cli("new", "--name", name, "--ttl", "600", check=True)
    try:
        server.cli("ssh-config", name, check=True)
        for token in ("pdk_wrong", member_of(server)):
            env = {**server.env, "PADDOCK_TOKEN": token}
            refused = subprocess.run(
                ["ssh", "-F", str(config), f"paddock-{name}", "true"],
                env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            assert refused.returncode == 255, refused.stderr
            assert "not accepted" in refused.stderr or "no box named" in refused.stderr
        # Nothing reached the box: no session's files were ever written there.
        assert (
            server.sh(name, "ls /run/paddock/ssh 2>&1 || true")
            .strip()
            .endswith("No such file or directory")
        )
        # And no box listens for SSH, before or during a session.
        listening = ssh(server, config, f"paddock-{name}", "ss -Hltn")
        assert listening.returncode == 0 and ":22 " not in listening.stdout
    finally:
        server.cli("rm", "--force", name)


def member_of(server: Server) -> str:
    """A member's token on this server (its owner made first if need be)."""
    with Client(url=server.url, token=server.token) as c:
        if not any(m.role == "owner" for m in c.list_members()):
            create_owner(server)
    return member_token(server, f"ssh{uuid.uuid4().hex[:4]}")
