"""The dashboard's server side on fakes: its page behind the login with a strict CSP and
no inline script, its assets (gzipped, hashed, nothing outside their folder), the live
box list (/v1/events) per user, and the terminal WebSocket."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from paddock.wire import frames as _frames
from paddockd.api.app import create_app
from paddockd.api.routes import dashboard

from ..conftest import PASSWORD, World, serve_api
from ..services.test_terminals import Shell


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.services), follow_redirects=False) as c:
        yield c


def account(client: TestClient, world: World, name: str) -> tuple[str, str]:
    """A new account `name` (the first is the owner) logged in: (session cookie, CSRF)."""
    accounts = world.services.accounts
    if not client.portal.call(accounts.has_owner):
        client.portal.call(
            accounts.create_owner, accounts.new_setup_link(), name, PASSWORD, PASSWORD
        )
    else:
        link, _, _ = client.portal.call(world.services.members.invite)
        token = link.rsplit("/", 1)[1]
        client.portal.call(accounts.create_account, "invite", token, name, PASSWORD, PASSWORD)
    _, cookie, csrf = client.portal.call(accounts.login, "127.0.0.1", name, PASSWORD)
    return cookie, csrf


@pytest.fixture
def assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"app.js": "app-X.js", "app.css": "app-Y.css"}')
    for name, text in (("app-X.js", "console.log(1)"), ("app-Y.css", "body{}")):
        (folder / name).write_text(text)
        (folder / (name + ".gz")).write_bytes(gzip.compress(text.encode()))
    (tmp_path / "secret.txt").write_text("not an asset")
    monkeypatch.setattr(dashboard, "ASSETS", folder)
    return folder


def test_the_page_needs_a_session(client: TestClient, world: World, assets: Path) -> None:
    resp = client.get("/")
    assert resp.status_code == 303 and resp.headers["location"] == "/login?next=/"
    cookie, csrf = account(client, world, "ada")
    client.cookies.set("paddock_session", cookie)
    page = client.get("/")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    script = re.search(r"script-src ([^;]*)", policy)
    assert script and script[1] == "'self'" and "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy and "ws://testserver" in policy
    # Every script is a file of the site's own; the session's CSRF token is in a meta tag.
    assert re.findall(r"<script[^>]*>", page.text) == [
        '<script type="module" src="/dashboard/assets/app-X.js">'
    ]
    assert f'<meta name="paddock-csrf" content="{csrf}">' in page.text


def test_assets_are_sent_gzipped_and_nothing_else_is(client: TestClient, assets: Path) -> None:
    resp = client.get("/dashboard/assets/app-X.js", headers={"Accept-Encoding": "gzip"})
    assert resp.status_code == 200 and resp.headers["content-encoding"] == "gzip"
    assert resp.text == "console.log(1)" and "immutable" in resp.headers["cache-control"]
    assert resp.headers["content-type"].startswith("text/javascript")
    plain = client.get("/dashboard/assets/app-Y.css", headers={"Accept-Encoding": "identity"})
    assert plain.text == "body{}" and "content-encoding" not in plain.headers
    for name in ("..%2Fsecret.txt", "manifest.json.gz", ".hidden", "nope.js"):
        assert client.get(f"/dashboard/assets/{name}").status_code == 404, name


def test_unbuilt_assets_say_how_to_build_them(
    client: TestClient, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "ASSETS", tmp_path / "none")
    cookie, _ = account(client, world, "ada")
    client.cookies.set("paddock_session", cookie)
    resp = client.get("/")
    assert resp.status_code == 503 and "scripts/build-dashboard" in resp.text


def sse(port: int, cookie: str, until: str) -> list[tuple[str, dict[str, object]]]:
    """The events of /v1/events up to and including the first of kind `until`."""
    got: list[tuple[str, dict[str, object]]] = []
    url = f"http://127.0.0.1:{port}/v1/events"
    with httpx.stream("GET", url, cookies={"paddock_session": cookie}, timeout=10) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in resp.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                got.append((kind, json.loads(line[6:])))
                if kind == until:
                    return got
    raise AssertionError(f"the stream ended before a {until} event: {got}")


def test_events_show_each_user_their_own_boxes(client: TestClient, world: World) -> None:
    owner, owner_csrf = account(client, world, "ada")
    bob, bob_csrf = account(client, world, "bob")
    # A change through the session needs its CSRF token.
    client.cookies.set("paddock_session", owner)
    made = client.post("/v1/boxes", json={"name": "ada-box"})
    assert made.status_code == 401 and "CSRF" in made.json()["error"]["message"]
    for cookie, csrf, name in ((owner, owner_csrf, "ada-box"), (bob, bob_csrf, "bob-box")):
        client.cookies.set("paddock_session", cookie)
        made = client.post("/v1/boxes", json={"name": name}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201
    with serve_api(world) as port:
        ((_, first),) = sse(port, bob, "boxes")
        assert [b["name"] for b in first["boxes"]] == ["bob-box"]  # type: ignore[index]
        ((_, everyone),) = sse(port, owner, "boxes")
        names = {b["name"] for b in everyone["boxes"]}  # type: ignore[index]
        assert names == {"ada-box", "bob-box"}


def test_the_terminal_websocket(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def exec_(cid: str, spec: object) -> Shell:
        return Shell(spec)  # type: ignore[arg-type]

    monkeypatch.setattr(world.runtime, "exec", exec_)
    cookie, csrf = account(client, world, "ada")
    client.cookies.set("paddock_session", cookie)
    client.post("/v1/boxes", json={"name": "t"}, headers={"X-CSRF-Token": csrf})
    path = "/v1/boxes/t/terminal/ws"
    # A session cookie from another site's page is refused (cross-site WebSocket hijacking).
    with client.websocket_connect(path, headers={"Origin": "http://evil.example"}) as ws:
        ws.send_text(json.dumps({"key": "k" * 16}))
        kind, payload = next(_frames.FrameDecoder().feed(ws.receive_bytes()))
        assert kind == _frames.ERROR and b"this site" in payload
    here = {"Origin": "http://testserver"}
    for resumed, text in ((False, b"echo hi\n"), (True, b"echo hi\necho again\n")):
        with client.websocket_connect(path, headers=here) as ws:
            ws.send_text(json.dumps({"key": "k" * 16, "cols": 80, "rows": 24}))
            assert json.loads(ws.receive_text()) == {"type": "attached", "resumed": resumed}
            ws.send_bytes(b"echo again\n" if resumed else b"echo hi\n")
            got = b""
            while got != text:
                for _, data in _frames.FrameDecoder().feed(ws.receive_bytes()):
                    got += data
    assert world.services.terminals.count == 1
    with client.websocket_connect(path, headers=here) as ws:
        ws.send_text(json.dumps({"key": "k" * 16}))
        ws.receive_text()
        ws.send_text(json.dumps({"type": "close"}))
    client.portal.call(world.services.terminals.shutdown)
    assert world.services.terminals.count == 0


def test_the_sdk_follows_events(world: World) -> None:
    from paddock import Client

    with serve_api(world) as port, Client(url=f"http://127.0.0.1:{port}", token=world.token) as c:
        c.create_box("seen")
        events = c.follow_events()
        kind, listed = next(events)
        assert kind == "boxes" and [b.name for b in listed.boxes] == ["seen"]
        c.stop_box("seen")
        # A stop passes through `stopping` (and the write of its snapshot): an event may
        # show the box on its way before the one that shows it stopped.
        for _ in range(5):
            kind, box = next(events)
            assert kind == "box" and box.name == "seen"
            if box.state == "stopped":
                break
            assert box.state == "stopping"
        assert box.state == "stopped"
        events.close()
