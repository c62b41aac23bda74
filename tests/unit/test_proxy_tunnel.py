"""The SDK and the CLI through a real HTTP CONNECT proxy (tests/connectproxy.py), against
paddockd's API on fakes served by uvicorn, over HTTP and HTTPS.

The server's name is `paddock.test`: the proxy maps it to 127.0.0.1, and so does this
process when a test connects directly (`names`); CLI subprocesses reach it only through
the proxy. Nothing leaves the machine."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from paddock import AsyncClient, Client
from paddock._proxy import PROXY_FAILED
from paddock.wire.errors import ConnectionFailed

from ..connectproxy import ConnectProxy
from ..servers import self_signed
from .conftest import World, serve_api

pytestmark = pytest.mark.timeout(120)

SRC = Path(__file__).resolve().parents[2] / "src"
NAME = "paddock.test"
PROXY_VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy",
                   "NO_PROXY", "all_proxy", "ALL_PROXY", "PADDOCK_CA_BUNDLE")  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process resolves paddock.test to 127.0.0.1 and refuses to look up any other
    name that is not loopback, so a test cannot reach out by mistake."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):  # anyio (httpx) asks with IDNA bytes
            host = host.decode("ascii")
        if host == NAME:
            host = "127.0.0.1"
        elif host not in ("127.0.0.1", "localhost", "::1", None):
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: not in this test's names")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with ConnectProxy(hosts={NAME}) as p:
        yield p


# -- the server ----------------------------------------------------------------------------


@pytest.fixture
def port(world: World) -> Iterator[int]:
    with serve_api(world) as p:
        yield p


def certificate(tmp: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` only (no IP address: the name is checked)."""
    return self_signed(tmp, name, dns=name)


@pytest.fixture
def tls_port(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The API over HTTPS with a certificate for paddock.test, trusted via
    PADDOCK_CA_BUNDLE."""
    cert, key = certificate(tmp_path, NAME)
    monkeypatch.setenv("PADDOCK_CA_BUNDLE", str(cert))
    with serve_api(world, ssl_certfile=str(cert), ssl_keyfile=str(key)) as p:
        yield p


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def exec_over_websocket(client: Client, box: str) -> tuple[str, int | None]:
    session = client.exec_session(box, ["echo", "over", "ws"])
    try:
        out = b"".join(data for kind, data in session if kind == "stdout")
    finally:
        session.close()
    return out.decode(), session.exit_code


# -- the sync client and WebSocket sessions ------------------------------------------------


def test_requests_and_sessions_go_through_the_proxy(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with Client(f"http://{NAME}:{port}", token=world.token) as c:
        c.create_box(name="b")
        assert [b.name for b in c.list_boxes()] == ["b"]
        assert c.exec("b", ["echo", "hi"]).stdout == "echo hi\n"
        # Keep-alive: the calls share one tunnel; the WebSocket session opens its own.
        assert proxy.tunnelled == [f"{NAME}:{port}"]
        assert exec_over_websocket(c, "b") == ("echo over ws\n", 0)
    assert proxy.tunnelled == [f"{NAME}:{port}"] * 2
    connect = proxy.asked[0]
    assert (connect.method, connect.headers["host"]) == ("CONNECT", f"{NAME}:{port}")
    assert "proxy-authorization" not in connect.headers


def test_an_ipv6_server_is_named_in_brackets(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy resolves the server's address; this one (documentation's range) is only
    ever a name here: the test proxy dials 127.0.0.1."""
    proxy.hosts.add("2001:db8::7")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with Client(f"http://[2001:db8::7]:{port}", token=world.token) as c:
        assert c.list_boxes() == []
    target = f"[2001:db8::7]:{port}"
    assert proxy.tunnelled == [target] and proxy.asked[0].headers["host"] == target


def test_a_session_may_be_quiet_longer_than_the_connect_timeout(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket handed to websockets must not keep the timeout it was opened with
    (websockets before 17 reads a ws:// socket as it is; 17 polls it first)."""
    from paddockd.runtime.fake import FakeExec

    quick = FakeExec.output

    async def after_a_pause(self: FakeExec) -> AsyncIterator[tuple[int, bytes]]:
        await asyncio.sleep(1.0)
        async for frame in quick(self):
            yield frame

    with Client(f"http://127.0.0.1:{port}", token=world.token) as c:
        c.create_box(name="b")
        exec_over_websocket(c, "b")  # the first session's imports, on both sides
    monkeypatch.setattr(FakeExec, "output", after_a_pause)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    for url in (f"http://127.0.0.1:{port}", f"http://{NAME}:{port}"):
        with Client(url, token=world.token, timeout=0.5) as c:
            assert exec_over_websocket(c, "b") == ("echo over ws\n", 0)
    assert len(proxy.tunnelled) == 1


def test_no_proxy_and_loopback_go_direct(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch, names: None
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "example.com,.test")
    with Client(f"http://{NAME}:{port}", token=world.token) as c:
        c.create_box(name="b")
        assert exec_over_websocket(c, "b")[1] == 0
    monkeypatch.delenv("NO_PROXY")
    for url in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        with Client(url, token=world.token) as c:
            assert [b.name for b in c.list_boxes()] == ["b"]
            assert exec_over_websocket(c, "b")[1] == 0
    assert proxy.asked == []


def test_credentials_in_the_proxy_url_are_sent(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy.require = basic("al@corp", "pa:ss")
    monkeypatch.setenv("http_proxy", f"http://al%40corp:pa%3Ass@127.0.0.1:{proxy.port}")
    with Client(f"http://{NAME}:{port}", token=world.token) as c:
        c.create_box(name="b")
        assert exec_over_websocket(c, "b")[1] == 0
    assert [a.headers["proxy-authorization"] for a in proxy.asked] == [proxy.require] * 2


@pytest.mark.parametrize("credentials", ["", "al:wrong@"])
def test_a_proxy_asking_for_credentials_is_a_clear_error(
    credentials: str, world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy.require = basic("al", "right")
    monkeypatch.setenv("HTTP_PROXY", f"http://{credentials}127.0.0.1:{proxy.port}")
    with Client(f"http://{NAME}:{port}", token=world.token) as c:
        for attempt in (c.list_boxes, lambda: c.exec_session("b", ["true"])):
            with pytest.raises(ConnectionFailed) as failed:
                attempt()
            err = failed.value
            assert err.code == PROXY_FAILED
            assert err.message.startswith(
                f"the proxy at 127.0.0.1:{proxy.port} (HTTP_PROXY) refused a tunnel to "
                f"{NAME}:{port}: 407 Proxy Authentication Required; "
            )
            assert ("did not accept" in err.message) == bool(credentials)
            assert "wrong" not in err.message
    assert proxy.tunnelled == []


def test_a_refusing_or_missing_proxy_is_named(
    world: World, port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy.refuse_with = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\nno no"
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with (
        Client(f"http://{NAME}:{port}", token=world.token) as c,
        pytest.raises(
            ConnectionFailed,
            match=r"\(HTTP_PROXY\) refused a tunnel to paddock\.test:\d+: 403 Forbidden$",
        ),
    ):
        c.list_boxes()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nobody = s.getsockname()[1]  # nothing listens there once the socket is closed
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{nobody}")
    with (
        Client(f"http://{NAME}:{port}", token=world.token) as c,
        pytest.raises(
            ConnectionFailed, match=rf"^cannot reach the proxy at 127.0.0.1:{nobody} \(HTTP_PROXY\)"
        ),
    ):
        c.list_boxes()


def test_a_proxy_that_hangs_up_or_is_not_a_proxy(
    world: World, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    junk = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        for reply in (b"", b"SSH-2.0-OpenSSH_9.2\r\n"):
            conn, _ = junk.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(reply)

    threading.Thread(target=answer, daemon=True).start()
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{junk.getsockname()[1]}")
    with junk, Client(f"http://{NAME}:{port}", token=world.token) as c:
        for _ in range(2):
            with pytest.raises(ConnectionFailed, match="gave no usable answer to a CONNECT"):
                c.list_boxes()


# -- HTTPS: TLS inside the tunnel, with the server's own name ------------------------------


def test_https_goes_through_the_tunnel_with_the_servers_name(
    world: World, tls_port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    with Client(f"https://{NAME}:{tls_port}", token=world.token) as c:
        c.create_box(name="b")
        assert c.exec("b", ["echo", "tls"]).stdout == "echo tls\n"
        assert exec_over_websocket(c, "b") == ("echo over ws\n", 0)
    assert proxy.tunnelled == [f"{NAME}:{tls_port}"] * 2


def test_https_checks_the_certificate_inside_the_tunnel(
    world: World, tls_port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy.hosts.add("other.test")  # a name the server's certificate does not cover
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    with (
        Client(f"https://other.test:{tls_port}", token=world.token) as c,
        pytest.raises(
            ConnectionFailed,
            match=r"TLS with the Paddock server at other\.test:\d+ through the proxy",
        ),
    ):
        c.list_boxes()
    monkeypatch.delenv("PADDOCK_CA_BUNDLE")  # the system's CAs do not know the server
    with (
        Client(f"https://{NAME}:{tls_port}", token=world.token) as c,
        pytest.raises(ConnectionFailed, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        c.list_boxes()


def test_the_tls_handshake_names_the_server_not_the_proxy(
    tmp_path: Path, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate(tmp_path, NAME)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    seen: list[str | None] = []
    context.sni_callback = lambda _sock, name, _ctx: seen.append(name)
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = listener.accept()
        with context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(4096)
            tls.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("PADDOCK_CA_BUNDLE", str(cert))
    from paddock._http import ConnectionPool

    pool = ConnectionPool(f"https://{NAME}:{listener.getsockname()[1]}")
    with listener:
        response = pool.request("GET", "/v1/health", {})
        assert (response.status, response.read()) == (204, b"")
    pool.close()
    assert seen == [NAME]


# -- the async client (the same stack, driven from asyncio) ---------------------------------


def test_the_async_client_takes_the_same_road(
    world: World, tls_port: int, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch, names: None
) -> None:
    async def boxes(url: str) -> list[str]:
        async with AsyncClient(url, token=world.token) as c:
            return [b.name for b in await c.list_boxes()]

    world_url = f"https://{NAME}:{tls_port}"
    with Client(world_url, token=world.token) as c:  # direct: no proxy variable yet
        c.create_box(name="b")
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    assert asyncio.run(boxes(world_url)) == ["b"]
    assert proxy.tunnelled == [f"{NAME}:{tls_port}"]
    monkeypatch.setenv("NO_PROXY", NAME)
    assert asyncio.run(boxes(world_url)) == ["b"]
    assert len(proxy.asked) == 1
    monkeypatch.delenv("NO_PROXY")
    proxy.require = basic("al", "right")
    with pytest.raises(ConnectionFailed) as failed:
        asyncio.run(boxes(world_url))
    assert failed.value.code == PROXY_FAILED
    assert f"the proxy at 127.0.0.1:{proxy.port} (HTTPS_PROXY)" in failed.value.message
    assert "407" in failed.value.message
    monkeypatch.setenv("HTTPS_PROXY", f"http://a%6c:right@127.0.0.1:{proxy.port}")
    assert asyncio.run(boxes(world_url)) == ["b"]
    assert proxy.asked[-1].headers["proxy-authorization"] == proxy.require


def test_the_async_client_tunnels_plain_http_too(
    world: World, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the sync client: plain HTTP goes through a CONNECT tunnel, and the proxy's 407
    to it is the proxy's error, not the server's."""
    proxy.refuse_with = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
    monkeypatch.setenv("HTTP_PROXY", proxy.url)

    async def boxes() -> None:
        async with AsyncClient(f"http://{NAME}:7", token="t") as c:
            await c.list_boxes()

    with pytest.raises(ConnectionFailed) as failed:
        asyncio.run(boxes())
    assert failed.value.code == PROXY_FAILED and "407" in failed.value.message
    assert [(a.method, a.target) for a in proxy.asked] == [("CONNECT", f"{NAME}:7")]


# -- the CLI -------------------------------------------------------------------------------


def cli(
    tmp_path: Path, url: str, token: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "paddock.cli.main", *args],
        env={
            **base,
            "PYTHONPATH": str(SRC),
            "PADDOCK_CONFIG": str(tmp_path / "cli.json"),
            "HOME": str(tmp_path),
            "PADDOCK_URL": url,
            "PADDOCK_TOKEN": token,
            **env,
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_the_cli_goes_through_the_proxy(
    world: World, port: int, proxy: ConnectProxy, tmp_path: Path
) -> None:
    url, env = f"http://{NAME}:{port}", {"HTTP_PROXY": proxy.url}
    made = cli(tmp_path, url, world.token, "new", "--name", "b", **env)
    assert made.returncode == 0, made.stderr
    listed = cli(tmp_path, url, world.token, "ls", "-q", **env)
    assert (listed.returncode, listed.stdout) == (0, "b\n"), listed.stderr
    # -i: an exec session over a WebSocket, through its own tunnel.
    ran = cli(tmp_path, url, world.token, "exec", "-i", "b", "--", "echo", "hi", **env)
    assert (ran.returncode, ran.stdout) == (0, "echo hi\n"), ran.stderr
    assert len(proxy.tunnelled) >= 3 and set(proxy.tunnelled) == {f"{NAME}:{port}"}


def test_the_cli_goes_direct_to_loopback(
    world: World, port: int, proxy: ConnectProxy, tmp_path: Path
) -> None:
    env = {"HTTP_PROXY": proxy.url, "https_proxy": proxy.url}
    listed = cli(tmp_path, f"http://127.0.0.1:{port}", world.token, "ls", "-q", **env)
    assert listed.returncode == 0, listed.stderr
    assert proxy.asked == []


def test_the_cli_over_https_through_the_proxy(
    world: World, tls_port: int, proxy: ConnectProxy, tmp_path: Path
) -> None:
    url, env = f"https://{NAME}:{tls_port}", {"HTTPS_PROXY": proxy.url}
    env["PADDOCK_CA_BUNDLE"] = os.environ["PADDOCK_CA_BUNDLE"]
    made = cli(tmp_path, url, world.token, "new", "--name", "b", **env)
    assert made.returncode == 0, made.stderr
    ran = cli(tmp_path, url, world.token, "exec", "-i", "b", "--", "echo", "tls", **env)
    assert (ran.returncode, ran.stdout) == (0, "echo tls\n"), ran.stderr
    assert set(proxy.tunnelled) == {f"{NAME}:{tls_port}"}


@pytest.mark.parametrize(("args", "code"), [(("ls",), 1), (("exec", "b", "--", "true"), 125)])
def test_the_cli_reports_a_refusing_proxy_in_one_message(
    args: tuple[str, ...], code: int, port: int, proxy: ConnectProxy, tmp_path: Path
) -> None:
    proxy.require = basic("al", "right")
    done = cli(tmp_path, f"http://{NAME}:{port}", "t0ken", *args, HTTP_PROXY=proxy.url)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        f"paddock: the proxy at 127.0.0.1:{proxy.port} (HTTP_PROXY) refused a tunnel to "
        f"{NAME}:{port}: 407 Proxy Authentication Required; give HTTP_PROXY credentials: "
        "http://USER:PASSWORD@HOST:PORT"
    )
    assert len(lines) == 2 and "NO_PROXY" in lines[1] and "paddockd" not in lines[1]


def test_a_socks_proxy_is_refused_by_name(tmp_path: Path) -> None:
    done = cli(
        tmp_path, f"https://{NAME}", "t0ken", "ls", HTTPS_PROXY="socks5://u:secret@127.0.0.1:9"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "HTTPS_PROXY names a socks5:// proxy" in done.stderr
    assert "secret" not in done.stderr
