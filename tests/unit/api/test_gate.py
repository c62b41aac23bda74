"""The gate in front of the routes: the API token before any body is read, then body caps
(JSON 1 MiB; uploads stream uncapped)."""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from paddockd.api.app import MAX_JSON_BODY, create_app

from ..conftest import World

pytestmark = pytest.mark.anyio
CHUNK = 64 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Body:
    """A streamed request body that records how much of it the server pulled."""

    def __init__(self, size: int, data: bytes | None = None) -> None:
        self.data = data
        self.size = len(data) if data is not None else size
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < self.size:
            n = min(CHUNK, self.size - self.sent)
            chunk = self.data[self.sent : self.sent + n] if self.data is not None else b" " * n
            self.sent += len(chunk)
            yield chunk


@pytest.fixture
def client(world: World) -> Iterator[httpx.AsyncClient]:
    # httpx's ASGI transport hands the app one chunk per `receive()`, so `Body.sent` is
    # exactly what the app asked for.
    transport = httpx.ASGITransport(app=create_app(world.services))
    yield httpx.AsyncClient(transport=transport, base_url="http://paddock")


def auth(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.token}"}


@pytest.mark.parametrize("declared", [True, False])
async def test_no_token_is_a_401_before_any_of_the_body_is_read(
    client: httpx.AsyncClient, declared: bool
) -> None:
    body = Body(300 * CHUNK)
    headers = {"Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(body.size)
    resp = await client.post("/v1/boxes", content=body, headers=headers)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "unauthorized"
    assert resp.headers["www-authenticate"] == "Bearer"
    assert body.sent == 0


async def test_a_wrong_token_is_refused_before_the_body_too(client: httpx.AsyncClient) -> None:
    body = Body(10 * CHUNK)
    headers = {"Authorization": "Bearer nope", "Content-Length": str(body.size)}
    resp = await client.put("/v1/boxes/b/files?path=x", content=body, headers=headers)
    assert resp.status_code == 401 and body.sent == 0


async def test_an_oversize_declared_body_is_a_413_unread(
    client: httpx.AsyncClient, world: World
) -> None:
    body = Body(MAX_JSON_BODY + 1)
    headers = {**auth(world), "Content-Length": str(body.size)}
    resp = await client.post("/v1/boxes", content=body, headers=headers)
    assert resp.status_code == 413
    error = resp.json()["error"]
    assert error["code"] == "payload_too_large" and error["details"] == {"limit": MAX_JSON_BODY}
    assert body.sent == 0


async def test_an_oversize_chunked_body_is_a_413_once_past_the_limit(
    client: httpx.AsyncClient, world: World
) -> None:
    body = Body(50 * MAX_JSON_BODY)
    resp = await client.post("/v1/boxes", content=body, headers=auth(world))
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
    # Read one chunk past the limit, and no further.
    assert MAX_JSON_BODY < body.sent <= MAX_JSON_BODY + CHUNK
    assert await client.get("/v1/boxes", headers=auth(world)) is not None  # still serving


async def test_a_body_at_the_limit_reaches_the_route(
    client: httpx.AsyncClient, world: World
) -> None:
    # JSON may end in whitespace: this body is exactly the limit and a valid request.
    doc = b'{"name": "web"}'
    padded = doc + b" " * (MAX_JSON_BODY - len(doc))
    headers = {**auth(world), "Content-Type": "application/json"}
    resp = await client.post("/v1/boxes", content=padded, headers=headers)
    assert resp.status_code == 201 and resp.json()["name"] == "web"


async def test_uploads_stream_past_the_json_limit(client: httpx.AsyncClient, world: World) -> None:
    await client.post("/v1/boxes", json={"name": "b"}, headers=auth(world))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo("big.bin")
        member.size = 3 * MAX_JSON_BODY
        tar.addfile(member, io.BytesIO(bytes(member.size)))
    body = Body(0, archive.getvalue())
    resp = await client.put("/v1/boxes/b/files?path=big", content=body, headers=auth(world))
    assert resp.status_code == 200 and resp.json()["bytes"] == body.size
    # The same size to a JSON route is refused.
    resp = await client.post("/v1/boxes/b/exec", content=Body(body.size), headers=auth(world))
    assert resp.status_code == 413


PUBLIC = {"/v1/health", "/v1/device/code", "/v1/device/token"}


async def test_every_api_route_but_health_and_device_login_is_behind_the_token(
    client: httpx.AsyncClient, world: World
) -> None:
    spec = create_app(world.services).openapi()
    checked = 0
    for template, operations in spec["paths"].items():
        if template in PUBLIC:  # each answers without a token (or refuses a bad body)
            continue
        path = re.sub(r"\{[^}]+\}", "x", template)
        for method in operations:
            resp = await client.request(method, path, content=b"{}")
            assert resp.status_code == 401, (method, path)
            checked += 1
    assert checked > 30
    assert (await client.post("/v1/no-such-route")).status_code == 401
