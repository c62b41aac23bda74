"""Preview URLs against a real paddockd and a real box: a web app bound to the box's own
127.0.0.1 answers through the path form; private without the secret or the owner's
session, public when made so, dead after removal or expiry; paddockd's cookies never reach
the app nor come back from it; server-sent events stream; WebSockets echo; a stopped box
wakes for its preview."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..harness import Server, free_port
from .test_https import caddy_in_front

APP = Path(__file__).parent / "data" / "preview_app.py"
PORT = 8080
SERVICE = f"""#!/bin/sh
exec python3 /opt/preview_app.py {PORT}
"""


def start_app(server: Server, box: str) -> None:
    """A box whose app starts now and with the box (a service of its init)."""
    server.cli("new", "--name", box, "--ttl", "1800", check=True)
    server.cli("push", box, str(APP), "--to", "/opt/preview_app.py", check=True)
    server.cli(
        "exec",
        "-u",
        "root",
        box,
        "--",
        "sh",
        "-c",
        "cat > /etc/paddock/services.d/preview-app && chmod +x /etc/paddock/services.d/preview-app"
        " && (setsid /etc/paddock/services.d/preview-app >/dev/null 2>&1 &)",
        stdin=SERVICE.encode(),
        check=True,
    )


@pytest.fixture(scope="module")
def served(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    server = Server(workdir / "previews", upstream_dns=dns_stub.address)
    try:
        start_app(server, "web")
        yield server, "web"
    finally:
        server.close()


def make(
    server: Server, box: str, *, public: bool = False, ttl: int | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"port": PORT, "public": public}
    if ttl:
        body["ttl"] = ttl
    made = httpx.post(
        f"{server.url}/v1/boxes/{box}/previews",
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
    )
    assert made.status_code == 201, made.text
    return dict(made.json())


def wait_up(url: str, client: httpx.Client, **options: Any) -> httpx.Response:
    """The answer once the box's app answers (paddockd's own redirects need no app)."""
    deadline = time.monotonic() + 60
    while True:
        answer = client.get(url, **options)
        if answer.status_code not in (502, 503) or time.monotonic() > deadline:
            return answer
        time.sleep(0.3)


def test_a_private_preview_needs_its_secret_then_keeps_it_in_a_cookie(
    served: tuple[Server, str],
) -> None:
    server, box = served
    preview = make(server, box)
    url: str = preview["url"]
    assert url.startswith(f"{server.url}/preview/{preview['box_id']}/{PORT}/?paddock_preview=")
    bare = url.split("?")[0]
    with httpx.Client(timeout=30) as anonymous:
        refused = anonymous.get(bare + "headers")
        assert refused.status_code == 401 and "private" in refused.text
        forged = anonymous.get(bare + "headers?paddock_preview=not-the-secret")
        assert forged.status_code == 401
    with httpx.Client(timeout=30, follow_redirects=False) as browser:
        first = wait_up(url, browser)
        assert (
            first.status_code == 303
            and first.headers["location"] == f"/preview/{preview['box_id']}/{PORT}/"
        )
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and f"Path=/preview/{preview['box_id']}/{PORT}/" in cookie
        # The redirect came from paddockd: the app in the box may not be up yet.
        seen = wait_up(
            bare + "headers?x=1",
            browser,
            headers={
                "Cookie": cookie.split(";")[0] + "; paddock_session=stolen; mine=kept",
                "Authorization": f"Bearer {server.token}",
                "X-API-Key": f"e2b_{server.token}",
            },
        )
        assert seen.status_code == 200, seen.text
        got = seen.json()
        # The app sees its own path, the original host, X-Forwarded-*, and no secrets.
        assert got["path"] == "/headers?x=1"
        assert got["headers"]["host"] == f"127.0.0.1:{server.port}"
        assert got["headers"]["x-forwarded-proto"] == "http"
        assert got["headers"]["x-forwarded-prefix"] == f"/preview/{preview['box_id']}/{PORT}"
        assert got["headers"]["cookie"] == "mine=kept"
        assert "paddock_preview" not in json.dumps(got)
        # paddockd's credentials never reach the box; an app's own Authorization does.
        assert server.token not in json.dumps(got)
        app_auth = browser.get(
            bare + "headers",
            headers={"Cookie": cookie.split(";")[0], "Authorization": "Basic YXBwOnB3"},
        )
        assert app_auth.json()["headers"]["authorization"] == "Basic YXBwOnB3"
        # Path-form pages share paddockd's origin: they are sandboxed away from it.
        assert "sandbox" in seen.headers["content-security-policy"]
        # The app may set its cookies, never paddockd's.
        set_by_app = browser.get(bare + "cookie", headers={"Cookie": cookie.split(";")[0]})
        assert set_by_app.headers.get_list("set-cookie") == ["app=1; Path=/"]
        assert "clear-site-data" not in set_by_app.headers  # it would log visitors out
        posted = browser.post(
            bare + "echo", content=b"x" * 3_000_000, headers={"Cookie": cookie.split(";")[0]}
        )
        assert posted.status_code == 200 and len(posted.content) == 3_000_000
        # The secret's redirect stays on this site, whatever the path looks like.
        secret = url.split("=")[1]
        odd = browser.get(f"{bare}/evil.example/x?paddock_preview={secret}")
        assert odd.status_code == 303 and odd.headers["location"].startswith("/preview/")
        # The same secret does not open another port's preview.
        other = browser.get(
            f"{server.url}/preview/{preview['box_id']}/8081/?paddock_preview={url.split('=')[1]}"
        )
        assert other.status_code == 404


def test_public_previews_streams_websockets_and_the_end_of_a_preview(
    served: tuple[Server, str],
) -> None:
    server, box = served
    preview = make(server, box, public=True)
    url: str = preview["url"]
    assert "paddock_preview" not in url
    with httpx.Client(timeout=30) as anyone:
        assert wait_up(url + "headers", anyone).status_code == 200
        # Server-sent events arrive as they are sent, not at the end.
        arrivals = []
        with anyone.stream("GET", url + "sse") as events:
            for line in events.iter_lines():
                if line.startswith("data:"):
                    arrivals.append(time.monotonic())
        assert len(arrivals) == 3 and arrivals[2] - arrivals[0] > 0.4

    async def echo() -> str:
        from websockets.asyncio.client import connect

        ws_url = url.replace("http://", "ws://") + "ws"
        async with connect(ws_url, proxy=None) as ws:
            await ws.send("hello")
            return str(await ws.recv())

    assert asyncio.run(echo()) == "echo:hello"
    listed = server.cli("host", "ls", "--json", check=True)
    assert [p["id"] for p in json.loads(listed.stdout)] == [preview["id"]]
    server.cli("host", "rm", preview["id"], check=True)
    assert httpx.get(url + "headers").status_code == 404
    # Expiry: a preview past its time answers as one that never was.
    later = make(server, box, public=True, ttl=600)
    with sqlite3.connect(server.dir / "data" / "paddock.db") as conn:
        conn.execute(
            "UPDATE previews SET expires_at = ? WHERE id = ?", (time.time() - 1, later["id"])
        )
    assert httpx.get(later["url"] + "headers").status_code == 404


def test_a_stopped_box_wakes_for_its_preview(served: tuple[Server, str]) -> None:
    server, box = served
    preview = make(server, box, public=True)
    server.cli("stop", box, check=True)
    with httpx.Client(timeout=30) as anyone:
        holding = anyone.get(preview["url"] + "headers")
        assert holding.status_code == 503 and holding.headers["refresh"] == "2"
        woke = wait_up(preview["url"] + "headers", anyone)
        assert woke.status_code == 200, woke.text
    assert server.client().get_box(box).state == "running"


@pytest.mark.skipif(shutil.which("caddy") is None, reason="needs caddy")
def test_on_a_hostname_a_preview_is_a_site_of_its_own_over_https(
    engine: None, workdir: Path, dns_stub: Any, hostname: str
) -> None:
    https_port = free_port()
    server = Server(
        workdir / "previews-https",
        upstream_dns=dns_stub.address,
        public_url=f"https://{hostname}:{https_port}",
    )
    try:
        start_app(server, "site")
        with caddy_in_front(server.port, hostname, workdir, https_port) as front:
            preview = make(server, "site")
            site = f"{PORT}-{preview['box_id']}.{hostname}"
            assert preview["url"].startswith(f"https://{site}:{https_port}/?paddock_preview=")
            other = f"{PORT + 1}-{preview['box_id']}.{hostname}"
            with mapped_to_loopback(site, other):
                ca = ssl.create_default_context(cafile=str(front.root_certificate))
                with httpx.Client(verify=ca, timeout=30, follow_redirects=False) as browser:
                    first = wait_up(preview["url"], browser)
                    assert first.status_code == 303 and first.headers["location"] == "/"
                    cookie = first.headers["set-cookie"]
                    assert "Secure" in cookie and "Path=/;" in cookie + ";"
                    base = f"https://{site}:{https_port}/"
                    with httpx.Client(verify=ca, timeout=30) as stranger:
                        assert stranger.get(base + "headers").status_code == 401
                    seen = browser.get(base + "headers")
                    assert seen.status_code == 200, seen.text
                    got = seen.json()
                    assert got["path"] == "/headers"
                    assert got["headers"]["host"] == f"{site}:{https_port}"
                    assert got["headers"]["x-forwarded-proto"] == "https"
                    # A site of its own: no sandbox needed, no prefix.
                    assert "content-security-policy" not in seen.headers
                    assert "x-forwarded-prefix" not in got["headers"]
                    # Caddy gets a certificate only for names of previews that exist.
                    with pytest.raises(httpx.ConnectError):
                        browser.get(f"https://{other}:{https_port}/")
    finally:
        server.close()


@contextmanager
def mapped_to_loopback(*names: str) -> Iterator[None]:
    hosts = Path("/etc/hosts")
    lines = "".join(f"127.0.0.1 {name}  # paddock test\n" for name in names)
    with hosts.open("a") as f:
        f.write(lines)
    try:
        yield
    finally:
        hosts.write_text(hosts.read_text().replace(lines, ""))
