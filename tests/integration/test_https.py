"""Paddock behind its front door for real: Caddy (Debian's) with `tls internal` on a test
hostname mapped to loopback in /etc/hosts, the configuration `paddockd configure` writes
(on free ports instead of 80/443), and the CLI and SDK over HTTPS end to end, WebSockets
included. Nothing leaves the machine: the name resolves to 127.0.0.1 and the CA is
Caddy's own."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from paddock import Client
from paddockd.frontdoor import FrontDoor, check_hostname

from ..harness import free_port
from .conftest import PADDOCK, Server
from .test_terminal import run_in_pty

pytestmark = pytest.mark.skipif(shutil.which("caddy") is None, reason="needs caddy")


@dataclass
class Door:
    door: FrontDoor
    env: dict[str, str]


@contextmanager
def caddy_in_front(
    port: int, hostname: str, workdir: Path, https_port: int = 0
) -> Iterator[FrontDoor]:
    """Caddy with `tls internal` for `hostname` in front of the paddockd on `port`, on
    free ports, as `paddockd configure` sets it up."""
    here = workdir / f"caddy-{uuid.uuid4().hex[:6]}"
    here.mkdir()
    front = FrontDoor(
        hostname,
        "internal",
        f"127.0.0.1:{port}",
        http_port=free_port(),
        https_port=https_port or free_port(),
        data_dir=here / "data",
        admin=f"unix/{here / 'admin.sock'}",
    )
    (here / "Caddyfile").write_text(front.caddyfile())
    log = open(here / "caddy.log", "wb")  # noqa: SIM115 - lives as long as the process
    caddy = subprocess.Popen(
        ["caddy", "run", "--config", str(here / "Caddyfile"), "--adapter", "caddyfile"],
        stdout=log,
        stderr=log,
        env={"HOME": str(here), "PATH": "/usr/bin:/bin"},
    )
    try:
        deadline = time.monotonic() + 30
        while not front.root_certificate.exists() or not _listening(front.https_port):
            assert caddy.poll() is None, (here / "caddy.log").read_text()[-2000:]
            assert time.monotonic() < deadline, (here / "caddy.log").read_text()[-2000:]
            time.sleep(0.2)
        yield front
    finally:
        caddy.terminate()
        caddy.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def door(server: Server, hostname: str, workdir: Path) -> Iterator[Door]:
    with caddy_in_front(server.port, hostname, workdir) as front:
        settings = workdir / f"cli-{uuid.uuid4().hex[:6]}.json"
        env = {
            **{k: v for k, v in server.env.items() if k not in ("PADDOCK_URL", "PADDOCK_TOKEN")},
            "PADDOCK_CONFIG": str(settings),
            "PADDOCK_CA_BUNDLE": str(front.root_certificate),
        }
        login = subprocess.run(
            [PADDOCK, "login", front.url, "--token-stdin"],
            input=server.token,
            env=env,
            capture_output=True,
            text=True,
        )
        assert login.returncode == 0, login.stderr
        yield Door(front, env)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def cli(door: Door, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PADDOCK, *args], input=stdin, env=door.env, capture_output=True, text=True, timeout=120
    )


def test_http_redirects_to_https_and_https_says_hsts(door: Door) -> None:
    front = door.door
    plain = http.client.HTTPConnection("127.0.0.1", front.http_port, timeout=10)
    plain.request("GET", "/v1/health", headers={"Host": front.hostname})
    moved = plain.getresponse()
    assert moved.status in (301, 308)
    # (On 80/443 the target is the URL itself; on test ports Caddy leaves the port out.)
    location = str(moved.getheader("Location"))
    assert location.startswith(f"https://{front.hostname}") and location.endswith("/v1/health")

    import ssl

    tls = ssl.create_default_context(cafile=str(front.root_certificate))
    secure = http.client.HTTPSConnection(front.hostname, front.https_port, context=tls, timeout=10)
    secure.request("GET", "/v1/health")
    answer = secure.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["status"] == "ok"
    assert answer.getheader("Strict-Transport-Security") == "max-age=31536000"


def test_the_cli_works_over_https_end_to_end(door: Door, tmp_path: Path) -> None:
    name = f"tls-{uuid.uuid4().hex[:6]}"
    assert cli(door, "new", "--name", name, "--ttl", "600").returncode == 0
    try:
        (tmp_path / "in.txt").write_text("over tls\n")
        pushed = cli(door, "push", name, str(tmp_path / "in.txt"), "--to", "/config/in.txt")
        assert pushed.returncode == 0, pushed.stderr
        ran = cli(door, "exec", name, "--", "sh", "-c", "cat /config/in.txt; cat > /config/out")
        assert ran.returncode == 0 and ran.stdout == "over tls\n", ran.stderr
        piped = cli(door, "exec", name, "--", "sh", "-c", "cat > /config/out", stdin="back\n")
        assert piped.returncode == 0, piped.stderr
        pulled = cli(door, "pull", name, "/config/out", "--to", str(tmp_path / "out"))
        assert pulled.returncode == 0, pulled.stderr
        assert (tmp_path / "out").read_text() == "back\n"
        # An interactive session is a WebSocket through Caddy.
        code, out = run_in_pty(
            SimpleNamespace(env=door.env),  # type: ignore[arg-type]
            ["exec", "-t", name, "--", "sh", "-c", "echo READY; read x; echo got-$x"],
            keys=b"tls\r",
        )
        assert code == 0 and "got-tls" in out, out
    finally:
        cli(door, "rm", "--force", name)


def test_the_sdk_streams_over_https(door: Door, box: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDOCK_CA_BUNDLE", door.env["PADDOCK_CA_BUNDLE"])
    with Client(url=door.door.url, token=_token(door)) as c:
        result = c.exec(box, ["sh", "-c", "head -c 3000000 /dev/zero | wc -c"])
        assert result.exit_code == 0 and result.stdout.strip() == "3000000"


def _token(door: Door) -> str:
    return str(json.loads(Path(door.env["PADDOCK_CONFIG"]).read_text())["token"])


def test_without_the_ca_the_cli_says_tls_failed_in_one_line(door: Door) -> None:
    env = {k: v for k, v in door.env.items() if k != "PADDOCK_CA_BUNDLE"}
    done = subprocess.run([PADDOCK, "ls"], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "TLS" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("https://paddock.example.com", "without a scheme"),
        ("paddock.example.com/x", "without a port or path"),
        ("paddock.example.com:8443", "without a port or path"),
        ("203.0.113.7", "is an IP address"),
        ("localhost", "not a hostname"),
        ("bad_name.example.com", "not a hostname"),
    ],
)
def test_bad_hostnames_are_refused_with_the_reason(given: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_hostname(given)
    done = subprocess.run(
        ["/opt/paddock/venv/bin/paddockd", "configure", "--hostname", given],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and message in done.stderr
