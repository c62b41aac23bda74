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
FIRST_REQUEST = 2.0  # seconds a box has for a whole request head (30 on a server)


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
                encoding = b"content-encoding: gzip\r\n" if "gzip" in target else b""
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + encoding
                    + b"transfer-encoding: chunked\r\n\r\n"
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
    # The upstream is on loopback, which the gateway never reaches on a server (`never`);
    # here it plays the internet, and only an owner's open_ranges lets the gateway reach it.
    grants = GatewayService(
        world.network,
        world.boxes,
        services.accounts,
        world.wired.services.credentials._repo,  # the same keys paddockd keeps
        world.wired.services.secrets._repo,
        open_ranges=("127.0.0.0/8",),
        never=(),
        bridges=("10.213.0.1/16",),
    )
    gateway = CredentialGateway(
        grants, Authority(world.cfg.data_dir / "gw"), first_request=FIRST_REQUEST
    )
    await gateway.start("127.0.0.1", 0, 0)
    assert gateway._server is not None
    port = gateway._server.sockets[0].getsockname()[1]
    services.credentials.changed.append(grants.forget_keys)  # as the wiring does
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
    mine = await placeholder(world, "a")
    for base, said in (
        ("http://169.254.169.254", b"cloud metadata"),  # never, whatever is opened
        ("http://10.213.0.7:8080", b"this host's boxes"),  # another box, the bridge
        ("http://10.99.0.1", b"not on the public internet"),
        ("http://192.0.2.1", b"the server's own networks"),
    ):
        await world.services.credentials.set("anthropic", KEY, base)
        status, answer = await ask(gate.port, BOX_A, mine)
        assert status == 502 and said in answer, (base, answer)
    gate.grants._open = ()  # loopback closed again, as on every server
    await world.services.credentials.set("anthropic", KEY, "http://127.0.0.1:9")
    status, answer = await ask(gate.port, BOX_A, mine)
    assert status == 502 and b"not on the public internet" in answer


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


async def raw(port: int, source: str, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(request)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def test_requests_framed_twice_or_aimed_elsewhere_never_leave(
    gate: Gate, upstream: Upstream
) -> None:
    """Content-Length with Transfer-Encoding (a request smuggled past a proxy in its body),
    an absolute target, a placeholder outside the key's headers (where an error could
    quote it back): refused before anything reaches the upstream."""
    mine = (await placeholder(gate.world, "a")).encode()
    head = b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + mine + b"\r\n"
    smuggled = head + b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
    assert b" 400 " in await raw(gate.port, BOX_A, smuggled)
    aimed = (
        b"GET http://elsewhere.example/x HTTP/1.1\r\nHost: x\r\nx-api-key: " + mine + b"\r\n\r\n"
    )
    assert b" 400 " in await raw(gate.port, BOX_A, aimed)
    quoted = head + b"anthropic-beta: " + mine + b"\r\ncontent-length: 0\r\n\r\n"
    assert b"only in x-api-key or Authorization" in await raw(gate.port, BOX_A, quoted)
    assert upstream.seen == []


async def test_a_compressed_answer_to_a_swapped_request_is_refused(
    gate: Gate, upstream: Upstream
) -> None:
    mine = await placeholder(gate.world, "a")
    status, answer = await ask(gate.port, BOX_A, mine, path="/anthropic/v1/gzip")
    assert status == 502 and b"compressed" in answer
    headers = upstream.seen[0]["headers"]
    assert isinstance(headers, dict) and headers["accept-encoding"] == "identity"


async def test_a_head_dripped_a_byte_at_a_time_is_cut_at_its_deadline(gate: Gate) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gate.port, local_addr=(BOX_A, 0))
    relay_first = FIRST_REQUEST  # the gateway's deadline for a whole head
    started = asyncio.get_running_loop().time()
    closed = False
    for byte in b"GET /anthropic/v1/models HTTP/1.1\r\nx-long: " + b"a" * 10_000:
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            closed = True
            break
        if reader.at_eof() or asyncio.get_running_loop().time() - started > relay_first + 5:
            closed = reader.at_eof()
            break
        await asyncio.sleep(0.005)
    writer.close()
    assert closed and asyncio.get_running_loop().time() - started < relay_first + 5


def test_every_base64_of_a_value_is_masked() -> None:
    import base64

    from paddockd.gateway.relay import Masker
    from paddockd.gateway.substitute import encodings

    value = b"ghp_" + b"x1y2z3" * 6
    masker = Masker({form: b"*" * len(form) for form in encodings(value)})
    for prefix in (b"", b"u", b"us", b"user:"):
        echoed = base64.b64encode(prefix + value)
        shown = masker.feed(echoed) + masker.flush()
        assert len(shown) == len(echoed) and value not in base64.b64decode(
            shown.replace(b"*", b"A")
        )


def test_a_value_echoed_as_json_or_html_is_masked() -> None:
    import json

    from paddockd.gateway.relay import Masker
    from paddockd.gateway.substitute import encodings

    value = b'a"b\\c<d>&e/f'
    masker = Masker({form: b"*" * len(form) for form in encodings(value)})
    for echoed in (json.dumps({"h": value.decode()}).encode(), b"<p>a&quot;b\\c&lt;d&gt;&amp;e/f"):
        shown = masker.feed(echoed) + masker.flush()
        assert b"*" * 8 in shown and b"c<d" not in shown and b"c&lt;d" not in shown, shown


async def test_a_box_refused_over_and_over_cannot_flood_the_log(
    gate: Gate, upstream: Upstream
) -> None:
    """Refusals are written at a rate per box, apart from uses: the key's uses stay."""
    mine = await placeholder(gate.world, "a")
    assert (await ask(gate.port, BOX_A, mine))[0] == 200
    for _ in range(60):
        assert (await ask(gate.port, BOX_A, "nothing"))[0] == 401
    await gate.grants.drain()
    uses = await gate.world.services.secrets.uses(kind="provider", limit=1000)
    refused = [u for u in uses if u.outcome == "refused"]
    assert 20 <= len(refused) < 40 and gate.grants.dropped >= 20
    assert [u.status for u in uses if u.outcome == "used"] == [200]
