"""The HTTP API on fakes: auth, JSON errors with stable codes, exec framing, files."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from paddock.wire import frames as _frames
from paddockd.api.app import create_app

from ..conftest import World


@pytest.fixture
def api(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.services)) as client:
        client.headers["Authorization"] = f"Bearer {world.token}"
        yield client


def test_health_needs_no_token(world: World) -> None:
    with TestClient(create_app(world.services)) as anon:
        assert anon.get("/v1/health").json()["status"] == "ok"


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic abc", "Bearer "])
def test_everything_else_needs_a_valid_token(world: World, header: str | None) -> None:
    with TestClient(create_app(world.services)) as anon:
        headers = {"Authorization": header} if header else {}
        resp = anon.get("/v1/boxes", headers=headers)
        assert resp.status_code == 401
        assert resp.json()["error"]["code"] == "unauthorized"


def test_create_show_list_stop_resume_delete(api: TestClient) -> None:
    created = api.post("/v1/boxes", json={"name": "web", "type": "small", "ttl": 60})
    assert created.status_code == 201
    box = created.json()
    for key in ("name", "id", "state", "type", "created_at", "expires_at"):
        assert key in box
    assert box["state"] == "running" and box["profile"] == "userns"
    assert api.get(f"/v1/boxes/{box['id'][:5]}").json()["name"] == "web"
    assert [b["name"] for b in api.get("/v1/boxes").json()["boxes"]] == ["web"]
    assert api.post("/v1/boxes/web/stop").json()["state"] == "stopped"
    assert api.post("/v1/boxes/web/stop").json()["state"] == "stopped"  # idempotent
    assert api.post("/v1/boxes/web/resume").json()["state"] == "running"
    assert api.delete("/v1/boxes/web").status_code == 409
    assert api.delete("/v1/boxes/web", params={"force": "true"}).status_code == 204
    assert api.get("/v1/boxes/web").json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"type": "nope"}, 404, "not_found"),
        ({"name": "../etc"}, 400, "invalid_request"),
        ({"ttl": -1}, 400, "invalid_request"),
        ({"ttl": "soon"}, 422, "invalid_request"),
        ({"ttl_action": "explode"}, 422, "invalid_request"),
    ],
)
def test_bad_create_requests(
    api: TestClient, body: dict[str, object], status: int, code: str
) -> None:
    resp = api.post("/v1/boxes", json=body)
    assert resp.status_code == status
    assert resp.json()["error"]["code"] == code and resp.json()["error"]["message"]


def test_capacity_error_code(api: TestClient) -> None:
    api.post("/v1/boxes", json={"type": "medium"})
    resp = api.post("/v1/boxes", json={"type": "medium"})
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "capacity_exceeded"


def test_unknown_route_is_json(api: TestClient) -> None:
    assert api.get("/v1/nothing").json()["error"]["code"] == "not_found"


def test_exec_streams_frames_and_exit_code(api: TestClient) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    resp = api.post("/v1/boxes/b/exec", json={"cmd": ["fail"]})
    assert resp.headers["content-type"] == _frames.MEDIA_TYPE
    frames = list(_frames.FrameDecoder().feed(resp.content))
    assert frames == [(_frames.STDERR, b"failed\n"), (_frames.EXIT, b'{"exit_code": 3}')]


def test_exec_wait_returns_json(api: TestClient) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    result = api.post(
        "/v1/boxes/b/exec", params={"wait": "true"}, json={"cmd": ["echo", "hi"]}
    ).json()
    assert result == {"exit_code": 0, "stdout": "echo hi\n", "stderr": ""}


def test_exec_session_over_websocket(api: TestClient, world: World) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    with api.websocket_connect(
        "/v1/boxes/b/exec/ws", headers={"Authorization": f"Bearer {world.token}"}
    ) as ws:
        ws.send_text(json.dumps({"cmd": ["cat"], "tty": True}))
        got = []
        while True:
            (frame,) = _frames.FrameDecoder().feed(ws.receive_bytes())
            got.append(frame)
            if frame[0] == _frames.EXIT:
                break
    assert got[0] == (_frames.STDOUT, b"cat\n") and json.loads(got[-1][1]) == {"exit_code": 0}


def test_exec_session_refuses_a_bad_token(api: TestClient) -> None:
    with api.websocket_connect(
        "/v1/boxes/b/exec/ws", headers={"Authorization": "Bearer nope"}
    ) as ws:
        kind, payload = next(_frames.FrameDecoder().feed(ws.receive_bytes()))
    assert kind == _frames.ERROR and json.loads(payload)["error"]["code"] == "unauthorized"


def _one_file(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_push_and_pull(api: TestClient, world: World) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    body = _one_file("a.txt", b"hi")
    resp = api.put("/v1/boxes/b/files", params={"path": "project"}, content=body)
    assert resp.json() == {"path": "/config/project", "bytes": len(body)}
    assert any(path == "/config/project" for (_, path) in world.runtime.files)
    pulled = api.get("/v1/boxes/b/files", params={"path": "/config/project/a.txt"})
    assert pulled.headers["content-type"] == "application/x-tar"
    # What was pulled, described as /files/stat describes it (the client places it by this).
    described = json.loads(base64.b64decode(pulled.headers["x-paddock-stat"]))
    assert described == {
        "path": "/config/project/a.txt",
        "exists": True,
        "type": "file",
        "size": 2,
        "mode": 0o644,
        "uid": 0,
        "gid": 0,
    }
    with tarfile.open(fileobj=io.BytesIO(pulled.content)) as tar:
        assert tar.getnames() == ["a.txt"]
    bad = api.put("/v1/boxes/b/files", params={"path": "p", "owner": "root"}, content=b"")
    assert bad.json()["error"]["code"] == "invalid_request"


def test_a_copy_is_placed_by_the_box(api: TestClient) -> None:
    """PUT /files/copy: the box decides where the tar lands (docker cp's rules), and says."""
    api.post("/v1/boxes", json={"name": "b"})
    body = _one_file("notes.txt", b"hi")

    def copy(path: str, kind: str, name: str) -> dict[str, Any]:
        params = {"path": path, "kind": kind, "name": name}
        return dict(api.put("/v1/boxes/b/files/copy", params=params, content=body).json())

    assert copy("/config/renamed.txt", "file", "notes.txt")["path"] == "/config/renamed.txt"
    assert copy("/config", "file", "notes.txt") == {"path": "/config/notes.txt", "bytes": len(body)}
    assert copy("/config/new", "into", "")["path"] == "/config/new"
    got = api.get("/v1/boxes/b/files/stat", params={"path": "/config/new/notes.txt"}).json()
    assert got["exists"] and got["size"] == 2
    assert copy("/no/such/x", "file", "notes.txt")["error"]["code"] == "not_found"
    for kind, name in [("file", "a/b"), ("file", ".."), ("file", ""), ("into", "x"), ("dir", "\0")]:
        assert copy("/config/x", kind, name)["error"]["code"] == "invalid_request", (kind, name)
    assert "error" in copy("/config/x", "folder", "notes.txt")


def test_stat(api: TestClient) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    home = api.get("/v1/boxes/b/files/stat", params={"path": "/config"}).json()
    assert (home["type"], home["mode"], home["uid"], home["gid"]) == ("dir", 0o755, 1000, 1000)
    assert api.get("/v1/boxes/b/files/stat", params={"path": "/nope"}).json()["exists"] is False


def test_stats_routes(api: TestClient) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    one = api.get("/v1/boxes/b/stats").json()
    assert one["name"] == "b" and one["cpu_percent"] == 12.5 and one["disk_quota_bytes"] is None
    assert [s["name"] for s in api.get("/v1/stats").json()["boxes"]] == ["b"]
    assert api.get("/v1/boxes/nope/stats").status_code == 404


def test_status_and_types(api: TestClient) -> None:
    status = api.get("/v1/status").json()
    assert status["engine"]["reachable"] and status["capacity"]["cpus_total"] == 4
    types = api.get("/v1/types").json()
    assert types["default"] == "small" and {t["name"] for t in types["types"]} >= {
        "small",
        "medium",
        "large",
    }


@pytest.mark.parametrize("token", ["é", "%C3%A9.%C3%A9", "abc.%FF", "x" * 3000])
def test_a_malformed_desktop_token_is_unauthorized_not_a_crash(world: World, token: str) -> None:
    with TestClient(create_app(world.services)) as anon:
        resp = anon.get(f"/desktop/abc123abc123?token={token}")
        assert resp.status_code == 401
        assert resp.json()["error"]["code"] == "unauthorized"
