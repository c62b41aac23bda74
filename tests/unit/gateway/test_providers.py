"""The credential gateway's provider side, on loopback: a box (a loopback address of its
own, as the bridge guard makes a box's address its own) sends its placeholder; the upstream
(a recording HTTP server) gets the real key, and the box never sees it. Refusals never
reach the upstream and each is logged."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from paddockd.domain.network import policy
from paddockd.gateway.ca import Authority
from paddockd.gateway.listeners import CredentialGateway
from paddockd.netpolicy.base import BoxAddress
from paddockd.services.gateway import GatewayService

from ..conftest import World
from ..netpolicy.test_dns import BOX_A, BOX_B

pytestmark = pytest.mark.anyio
KEY = "sk-ant-real-0123456789abcdef"
STRANGER = "127.0.0.9"


@dataclass
class Upstream:
    """A provider that records each request's head and answers with `body` in pieces
    (an event stream), echoing the key it got when asked to."""

    port: int = 0
    seen: list[dict[str, object]] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {k.lower(): v for k, _, v in (x.partition(": ") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.seen.append({"method": method, "target": target, "headers": headers})
                key = headers.get("x-api-key", "")
                pieces = [b"data: one\n\n", b"data: two\n\n"]
                if b"echo" in body:
                    pieces.append(f"data: you sent {key}\n\n".encode())
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for piece in pieces:
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                    await asyncio.sleep(0.05)
                writer.write(b"0\r\n\r\n")
                await writer.drain()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = Upstream()
    up.server = await asyncio.start_server(up.handle, "127.0.0.1", 0)
    up.port = up.server.sockets[0].getsockname()[1]
    yield up
    up.server.close()


@dataclass
class Gate:
    port: int
    grants: GatewayService
    world: World


@pytest.fixture
async def gate(world: World, upstream: Upstream) -> AsyncIterator[Gate]:
    services = world.services
    await services.credentials.set("anthropic", KEY, f"http://127.0.0.1:{upstream.port}")
    # The boxes at loopback addresses of their own (the fake network's syncs would give
    # them others).
    fixed = {}
    for name, ip in (("a", BOX_A), ("b", BOX_B)):
        box = await world.boxes.create(name, None, None, None)
        fixed[ip] = BoxAddress(box.id, ip, policy("allow-all"))
    world.network.box_at = fixed.get  # type: ignore[method-assign]
    await services.credentials.attach("a", "anthropic")
    await services.credentials.attach("b", "anthropic")
    # The upstream is on loopback, which only an owner's open_ranges lets the gateway reach.
    grants = GatewayService(
        world.network,
        world.boxes,
        services.accounts,
        world.wired.services.credentials._repo,  # the same keys paddockd keeps
        world.wired.services.secrets._repo,
        open_ranges=("127.0.0.0/8",),
    )
    gateway = CredentialGateway(grants, Authority(world.cfg.data_dir / "gw"))
    await gateway.start("127.0.0.1", 0, 0)
    assert gateway._server is not None
    port = gateway._server.sockets[0].getsockname()[1]
    yield Gate(port, grants, world)
    await gateway.close()
    await grants.drain()


async def placeholder(world: World, box: str) -> str:
    await world.boxes.run(box, ["env"])
    return world.runtime.execs[-1].env["ANTHROPIC_API_KEY"]


async def ask(
    port: int, source: str, key: str, body: bytes = b"{}", path: str = "/anthropic/v1/messages"
) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(
        f"POST {path}?beta=true HTTP/1.1\r\nHost: 10.213.0.1\r\nx-api-key: {key}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.read(), 10)
    except ConnectionResetError:
        answer = b""
    writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer else 0  # 0: closed without an answer
    return status, answer


async def test_the_upstream_gets_the_key_and_the_box_only_its_placeholder(
    gate: Gate, upstream: Upstream
) -> None:
    mine = await placeholder(gate.world, "a")
    status, answer = await ask(gate.port, BOX_A, mine, b'{"please": "echo"}')
    assert status == 200 and b"data: one" in answer and b"data: two" in answer
    [seen] = upstream.seen
    headers = seen["headers"]
    assert isinstance(headers, dict)
    assert headers["x-api-key"] == KEY and headers["host"] == f"127.0.0.1:{upstream.port}"
    assert seen["target"] == "/v1/messages?beta=true"
    # The upstream echoed the key: the box gets a mask of it, never the value.
    assert KEY.encode() not in answer and b"you sent " + b"*" * len(KEY) in answer
    await gate.grants.drain()
    [use] = await gate.world.services.secrets.uses(kind="provider")
    assert (use.box_name, use.outcome, use.status, use.path) == (
        "a",
        "used",
        200,
        "/anthropic/v1/messages",
    )


async def test_answers_stream_as_they_come(gate: Gate, upstream: Upstream) -> None:
    mine = await placeholder(gate.world, "a")
    reader, writer = await asyncio.open_connection("127.0.0.1", gate.port, local_addr=(BOX_A, 0))
    writer.write(
        f"GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: {mine}\r\n\r\n".encode()
    )
    first = await asyncio.wait_for(reader.readuntil(b"data: one\n\n"), 5)
    assert b"data: two" not in first  # the second piece is still 50 ms away upstream
    writer.close()


async def test_placeholders_are_refused_off_their_box_and_provider(
    gate: Gate, upstream: Upstream
) -> None:
    world = gate.world
    mine = await placeholder(world, "a")
    assert (await ask(gate.port, BOX_B, mine))[0] == 403  # box a's, sent from box b
    assert (await ask(gate.port, BOX_A, mine, path="/openai/v1/chat"))[0] == 403
    assert (await ask(gate.port, BOX_A, "sk-ant-guess-0123456789"))[0] == 401
    status, answer = await ask(gate.port, BOX_A, mine, path="/nowhere/x")
    assert status == 404 and b'"not_found"' in answer
    assert (await ask(gate.port, STRANGER, mine))[0] == 0  # no box has that address
    await world.services.credentials.detach("a", "anthropic")
    status, answer = await ask(gate.port, BOX_A, mine)
    assert status == 403 and b"auth attach a anthropic" in answer
    assert upstream.seen == []
    await gate.grants.drain()
    # Recorded off the request's path, so two close together may land in either order.
    reasons = sorted(str(u.reason) for u in await world.services.secrets.uses(kind="provider"))
    assert reasons == [
        "another box's placeholder",
        "no placeholder",
        "not attached",
        "the placeholder of provider anthropic",
    ]
    assert KEY not in str(await world.services.secrets.uses())


async def test_a_run_holds_its_key_while_it_runs(gate: Gate, upstream: Upstream) -> None:
    world = gate.world
    await world.services.credentials.detach("a", "anthropic")
    mine = await placeholder(world, "b")  # any box's: placeholders are made per box
    gate.grants.hold("b", ["anthropic"])  # the wrong id: holds are by box id
    box = await world.boxes.resolve("b")
    await world.services.credentials.detach("b", "anthropic")
    assert (await ask(gate.port, BOX_B, mine))[0] == 403
    gate.grants.hold(box.id, ["anthropic"])
    assert (await ask(gate.port, BOX_B, mine))[0] == 200
    gate.grants.release(box.id, ["anthropic"])
    assert (await ask(gate.port, BOX_B, mine))[0] == 403


async def test_the_gateway_never_connects_into_closed_ranges(world: World, gate: Gate) -> None:
    gate.grants._open = ()  # loopback closed again, as on every server by default
    mine = await placeholder(world, "a")
    status, answer = await ask(gate.port, BOX_A, mine)
    assert status == 502 and b"not on the public internet" in answer
    await world.services.credentials.set("anthropic", KEY, "http://169.254.169.254")
    status, answer = await ask(gate.port, BOX_A, mine)
    assert status == 502 and b"cloud metadata" in answer


async def test_garbage_and_slow_boxes_are_let_go(gate: Gate) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gate.port, local_addr=(BOX_A, 0))
    writer.write(b"\x16\x03\x01 not http at all\r\n\r\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", gate.port, local_addr=(BOX_A, 0))
    writer.write(b"POST /anthropic/x HTTP/1.1\r\n" + b"x-long: " + b"a" * 70000 + b"\r\n\r\n")
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    assert b"200 OK" not in answer
    writer.close()


async def test_boxes_get_their_gateway_url_per_agent(world: World) -> None:
    await world.services.credentials.set("moonshot", "sk-moon-0123456789")
    await world.boxes.create("k", None, None, None)
    await world.services.credentials.attach("k", "moonshot")
    await world.boxes.run("k", ["env"])
    env = world.runtime.execs[-1].env
    assert env["MOONSHOT_BASE_URL"] == "http://10.213.0.1/moonshot"
    assert env["KIMI_MODEL_API_KEY"] == env["MOONSHOT_API_KEY"] != "sk-moon-0123456789"
    assert json.dumps(env).count("sk-moon") == 0
