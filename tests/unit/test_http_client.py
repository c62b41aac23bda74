"""The sync SDK's HTTP/1.1 client against real servers: uvicorn for what it can frame, a
scripted socket for the rest (close-delimited and truncated bodies, a race, silence)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest

from paddock._client import Client
from paddock._http import ConnectionPool
from paddock.wire import frames as _frames
from paddock.wire.errors import ConnectionFailed, InvalidRequest

from ..servers import self_signed, uvicorn_thread

# pytest-timeout is a backstop; each test also asserts how long its calls took.
pytestmark = pytest.mark.timeout(60)

MIB = 1024 * 1024
# One MiB that is not all zeros, so a misplaced or repeated chunk changes the digest.
PATTERN = bytes(range(256)) * 4096
KEEP_ALIVE = 1.0  # uvicorn's timeout_keep_alive in these tests (paddockd: uvicorn's 5 s)

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class Seen:
    method: str
    path: str
    port: int  # the client's port: one per TCP connection
    headers: dict[str, str]


@dataclass
class App:
    """The conformance server: each path answers in one of the ways HTTP/1.1 allows."""

    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope["query_string"].decode()))
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        port = scope["client"][1]
        self.seen.append(Seen(method, path, port, headers))

        if path == "/reject":  # answers before reading the upload, like paddockd's token gate
            await respond(send, 413, b'{"error": {"code": "payload_too_large"}}')
        elif path == "/upload":
            digest, size = hashlib.sha256(), 0
            async for chunk in body_chunks(receive):
                digest.update(chunk)
                size += len(chunk)
            te = headers.get("transfer-encoding", "")
            await respond_json(send, {"size": size, "sha256": digest.hexdigest(), "te": te})
        else:
            body = b"".join([c async for c in body_chunks(receive)])
            await self.route(method, path, query, port, body, send)

    async def route(
        self, method: str, path: str, query: dict[str, str], port: int, body: bytes, send: Send
    ) -> None:
        if path == "/echo":
            await asyncio.sleep(float(query.get("delay", 0)))
            echo = {"id": query.get("id"), "port": port, "method": method, "body": body.decode()}
            await respond_json(send, echo)
        elif path == "/empty" or (path.startswith("/v1/boxes/") and method == "DELETE"):
            await respond(send, 204, b"")
        elif path == "/not-modified":
            await respond(send, 304, b"", [(b"etag", b'"v1"')])
        elif path == "/head":  # a HEAD answer announces a length it never sends
            await respond(send, 200, b"" if method == "HEAD" else b"x" * 1234, length=1234)
        elif path == "/length":
            await respond(send, 200, b"exactly these bytes")
        elif path == "/chunked":  # no length given: uvicorn frames it chunked
            await stream(send, [b"one,", b"two,", b"three"])
        elif path == "/slow":
            await stream(send, [b"tick\n"] * 5, pause=0.15)
        elif path == "/pause":
            await stream(send, [b"before\n", b"after\n"], pause=float(query["s"]))
        elif path == "/big":
            await self.big(send, int(query["mb"]))
        elif path == "/v1/boxes/b1/exec":  # an exec whose command is quiet for a while
            frames = [
                _frames.encode(_frames.STDOUT, b"a"),
                _frames.encode(_frames.STDOUT, b"b"),
                _frames.encode_json(_frames.EXIT, {"exit_code": 0}),
            ]
            await stream(send, frames, pause=0.6)
        elif path == "/v1/boxes/slow":
            await asyncio.sleep(1.0)
            await respond_json(send, {})
        else:
            await respond(send, 404, b"")

    async def big(self, send: Send, mib: int) -> None:
        """`mib` MiB, chunked; after the first MiB it waits until the test has received it,
        which a client that buffers whole bodies never does."""
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": PATTERN, "more_body": True})
        for _ in range(500):
            if self.release.is_set():
                break
            await asyncio.sleep(0.01)
        else:
            raise RuntimeError("the client never read the first MiB")  # uvicorn drops the line
        for _ in range(mib - 1):
            await send({"type": "http.response.body", "body": PATTERN, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def body_chunks(receive: Receive) -> Any:
    while True:
        message = await receive()
        yield message.get("body", b"")
        if not message.get("more_body"):
            return


async def respond(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    length: int | None = None,
) -> None:
    headers = list(headers or [])
    if status not in (204, 304):
        headers.append((b"content-length", str(len(body) if length is None else length).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond_json(send: Send, obj: Any) -> None:
    await respond(send, 200, json.dumps(obj).encode(), [(b"content-type", b"application/json")])


async def stream(send: Send, parts: list[bytes], pause: float = 0.0) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for i, part in enumerate(parts):
        if i and pause:
            await asyncio.sleep(pause)
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@dataclass
class Served:
    url: str
    app: App


@contextmanager
def serve(http: str = "auto", **config: Any) -> Iterator[Served]:
    """uvicorn in a thread on a random loopback port."""
    app = App()
    scheme = "https" if config.get("ssl_certfile") else "http"
    with uvicorn_thread(app, http=http, timeout_keep_alive=int(KEEP_ALIVE), **config) as port:
        yield Served(f"{scheme}://127.0.0.1:{port}", app)


@pytest.fixture(scope="module")
def _server() -> Iterator[Served]:
    with serve() as served:  # "auto", as paddockd runs it (httptools when installed)
        yield served


@pytest.fixture
def server(_server: Served) -> Served:
    _server.app.seen.clear()
    _server.app.release.clear()
    return _server


@pytest.fixture(scope="module", params=["httptools", "h11"])
def _framing_server(request: pytest.FixtureRequest) -> Iterator[Served]:
    with serve(request.param) as served:
        yield served


@pytest.fixture
def framing_server(_framing_server: Served) -> Served:
    """Each of uvicorn's HTTP/1.1 implementations: they differ in how they frame answers."""
    _framing_server.app.seen.clear()
    return _framing_server


class RawServer:
    """A loopback listener whose connections a test scripts byte by byte."""

    def __init__(self, script: Callable[[RawServer, socket.socket, int], None]) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self.heads: list[bytes] = []  # request heads in arrival order
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by the test
                return
            index, self.accepted = self.accepted, self.accepted + 1
            threading.Thread(target=self._run, args=(conn, index), daemon=True).start()

    def _run(self, conn: socket.socket, index: int) -> None:
        conn.settimeout(10)
        # OSError: the client hung up, so the script has nothing left to do.
        with conn, suppress(OSError):
            self.script(self, conn, index)

    def read_head(self, conn: socket.socket) -> bytes:
        """One request without a body; b"" once the client closed the connection."""
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(4096)
            if not more:
                return b""
            data += more
        self.heads.append(data)
        return data

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@contextmanager
def raw_server(script: Callable[[RawServer, socket.socket, int], None]) -> Iterator[RawServer]:
    server = RawServer(script)
    try:
        yield server
    finally:
        server.close()


Pools = Callable[..., ConnectionPool]


@pytest.fixture
def pools() -> Iterator[Pools]:
    """Makes `ConnectionPool`s and closes their idle connections after the test."""
    made: list[ConnectionPool] = []

    def make(url: str, **options: Any) -> ConnectionPool:
        made.append(ConnectionPool(url, **options))
        return made[-1]

    yield make
    for pool in made:
        pool.close()


@contextmanager
def took_at_most(seconds: float) -> Iterator[None]:
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < seconds, f"took {elapsed:.2f} s, expected < {seconds} s"


def get(pool: ConnectionPool, target: str, method: str = "GET", **kw: Any) -> tuple[int, bytes]:
    resp = pool.request(method, target, {}, **kw)
    return resp.status, resp.read()


def echo(
    pool: ConnectionPool, method: str = "GET", rid: str = "", body: bytes | None = None
) -> Any:
    resp = pool.request(method, f"/echo?id={rid}", {}, body)
    assert resp.status == 200
    return json.loads(resp.read())


# -- framing: answers without a body end at their head -------------------------------------


def test_204_ends_at_its_head_and_the_connection_is_reused(
    framing_server: Served, pools: Pools
) -> None:
    pool = pools(framing_server.url)
    with took_at_most(KEEP_ALIVE / 2):  # the old client waited for the keep-alive timeout
        for _ in range(3):
            assert get(pool, "/empty", "DELETE") == (204, b"")
        assert echo(pool)["method"] == "GET"
    assert len({s.port for s in framing_server.app.seen}) == 1


def test_304_ends_at_its_head(framing_server: Served, pools: Pools) -> None:
    pool = pools(framing_server.url)
    with took_at_most(KEEP_ALIVE / 2):
        resp = pool.request("GET", "/not-modified", {"If-None-Match": '"v1"'})
        assert (resp.status, resp.headers["etag"], resp.read()) == (304, '"v1"', b"")
        echo(pool)
    assert len({s.port for s in framing_server.app.seen}) == 1


def test_an_answer_to_head_has_no_body_whatever_its_length(
    framing_server: Served, pools: Pools
) -> None:
    pool = pools(framing_server.url)
    with took_at_most(KEEP_ALIVE / 2):
        resp = pool.request("HEAD", "/head", {})
        assert (resp.status, resp.headers["content-length"], resp.read()) == (200, "1234", b"")
        assert get(pool, "/head") == (200, b"x" * 1234)
    assert len({s.port for s in framing_server.app.seen}) == 1


def test_chunked_and_content_length_bodies(framing_server: Served, pools: Pools) -> None:
    pool = pools(framing_server.url)
    resp = pool.request("GET", "/chunked", {})
    assert resp.headers["transfer-encoding"] == "chunked"
    assert resp.read() == b"one,two,three"
    resp = pool.request("GET", "/length", {})
    assert resp.headers["content-length"] == "19"
    assert resp.read() == b"exactly these bytes"
    assert len({s.port for s in framing_server.app.seen}) == 1


def _close_delimited(server: RawServer, conn: socket.socket, index: int) -> None:
    server.read_head(conn)
    # HTTP/1.1 without Content-Length or chunking: the body ends when the connection does.
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello, ")
    time.sleep(0.05)
    conn.sendall(b"world")


def test_a_close_delimited_body_ends_with_the_connection(pools: Pools) -> None:
    with raw_server(_close_delimited) as raw:
        pool = pools(raw.url)
        with took_at_most(1.0):
            assert get(pool, "/") == (200, b"hello, world")
            assert get(pool, "/") == (200, b"hello, world")
        assert raw.accepted == 2  # such a connection cannot carry another request


def _early_hints(server: RawServer, conn: socket.socket, index: int) -> None:
    server.read_head(conn)
    conn.sendall(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    )
    server.read_head(conn)


def test_informational_answers_are_skipped(pools: Pools) -> None:
    with raw_server(_early_hints) as raw, took_at_most(1.0):
        assert get(pools(raw.url), "/") == (200, b"ok")


# -- keep-alive ------------------------------------------------------------------------------


def test_keep_alive_carries_every_request_on_one_connection(server: Served, pools: Pools) -> None:
    pool = pools(server.url)
    for i in range(5):
        assert echo(pool, "POST", str(i), json.dumps({"n": i}).encode())["id"] == str(i)
        assert get(pool, "/empty", "DELETE")[0] == 204
        assert get(pool, "/chunked")[1] == b"one,two,three"
    assert len(server.app.seen) == 15
    assert len({s.port for s in server.app.seen}) == 1
    # Bodiless POST/PUT/PATCH still say their length (some servers answer 411 otherwise).
    echo(pool, "POST")
    assert server.app.seen[-1].headers["content-length"] == "0"


def test_a_connection_the_server_closed_while_idle_is_not_used(
    server: Served, pools: Pools
) -> None:
    get_pool, post_pool = pools(server.url), pools(server.url)
    first_get, first_post = echo(get_pool), echo(post_pool, "POST", body=b"{}")
    time.sleep(KEEP_ALIVE + 0.5)  # uvicorn closes both idle connections meanwhile
    with took_at_most(0.5):
        second_get, second_post = echo(get_pool), echo(post_pool, "POST", body=b"{}")
    assert second_get["port"] != first_get["port"]
    assert second_post["port"] != first_post["port"]
    # Found closed before sending: a POST too goes out once, on a fresh connection.
    assert sorted(s.method for s in server.app.seen) == ["GET", "GET", "POST", "POST"]


def _closes_after_second_request(server: RawServer, conn: socket.socket, index: int) -> None:
    """The race a check before sending cannot see: the first connection takes a second
    request, then closes without answering it. Later connections answer everything."""
    answered = 0
    while head := server.read_head(conn):
        if index == 0 and answered == 1:
            return
        body = b"" if head.startswith(b"HEAD ") else b"ok"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + body)
        answered += 1


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"])
def test_an_idempotent_request_is_sent_again_when_a_reused_connection_dies(
    method: str, pools: Pools
) -> None:
    with raw_server(_closes_after_second_request) as raw:
        pool = pools(raw.url)
        body = b"" if method == "HEAD" else b"ok"
        with took_at_most(1.0):
            assert get(pool, "/", method) == (200, body)
            assert get(pool, "/", method) == (200, body)
        assert raw.accepted == 2
        assert [h.split(b" ")[0].decode() for h in raw.heads] == [method] * 3


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_a_non_idempotent_request_is_never_sent_twice(method: str, pools: Pools) -> None:
    with raw_server(_closes_after_second_request) as raw:
        pool = pools(raw.url)
        assert get(pool, "/", method, body=b"{}") == (200, b"ok")
        with took_at_most(1.0), pytest.raises(ConnectionFailed, match="not sent again"):
            get(pool, "/", method, body=b"{}")
        assert (raw.accepted, len(raw.heads)) == (1, 2)


def test_a_streamed_upload_is_never_sent_twice(pools: Pools) -> None:
    # PUT is idempotent, but a generator cannot be replayed.
    with raw_server(_closes_after_second_request) as raw:
        pool = pools(raw.url)
        assert get(pool, "/", "PUT", body=b"x")[0] == 200
        with pytest.raises(ConnectionFailed):
            get(pool, "/", "PUT", body=iter([b"a", b"b"]))
        assert raw.accepted == 1


def test_a_fresh_connection_that_dies_is_not_retried(pools: Pools) -> None:
    def hang_up(server: RawServer, conn: socket.socket, index: int) -> None:
        server.read_head(conn)

    with raw_server(hang_up) as raw:
        with took_at_most(1.0), pytest.raises(ConnectionFailed, match="without answering"):
            get(pools(raw.url), "/")
        assert raw.accepted == 1


# -- slow, cut short, silent ---------------------------------------------------------------


def test_a_slow_body_arrives_whole_when_each_pause_is_under_the_timeout(
    server: Served, pools: Pools
) -> None:
    pool = pools(server.url, read_timeout=0.5)
    start = time.monotonic()
    resp = pool.request("GET", "/slow", {})
    assert list(resp.iter_bytes()) == [b"tick\n"] * 5  # each piece as it comes
    assert time.monotonic() - start > 0.5


def test_a_stream_may_wait_without_a_read_timeout(server: Served, pools: Pools) -> None:
    pool = pools(server.url, read_timeout=0.3)
    with took_at_most(0.6), pytest.raises(ConnectionFailed, match=r"sent nothing for 0\.3 s"):
        get(pool, "/pause?s=1")
    assert get(pool, "/pause?s=0.8", read_timeout=None) == (200, b"before\nafter\n")


def _silent(server: RawServer, conn: socket.socket, index: int) -> None:
    server.read_head(conn)
    server.stop.wait(10)


def test_a_server_that_never_answers_fails_after_the_read_timeout(pools: Pools) -> None:
    with raw_server(_silent) as raw:
        pool = pools(raw.url, read_timeout=0.5)
        start = time.monotonic()
        with pytest.raises(ConnectionFailed, match=r"sent nothing for 0\.5 s"):
            get(pool, "/")
        assert 0.45 < time.monotonic() - start < 2.0


def test_a_server_that_reads_nothing_fails_after_the_write_timeout(pools: Pools) -> None:
    def deaf(server: RawServer, conn: socket.socket, index: int) -> None:
        server.stop.wait(10)

    def endless() -> Iterator[bytes]:
        for _ in range(4096):  # 4 GiB: far beyond any socket buffer
            yield PATTERN

    with raw_server(deaf) as raw:
        pool = pools(raw.url, write_timeout=0.5)
        with took_at_most(5.0), pytest.raises(ConnectionFailed, match="accepted no data"):
            pool.request("PUT", "/", {}, endless())


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Len",
    ],
    ids=["content-length", "chunked", "head"],
)
def test_an_answer_cut_short_fails_at_once(answer: bytes, pools: Pools) -> None:
    def cut(server: RawServer, conn: socket.socket, index: int) -> None:
        server.read_head(conn)
        conn.sendall(answer)

    with raw_server(cut) as raw:
        pool = pools(raw.url, read_timeout=5)
        with took_at_most(1.0), pytest.raises(ConnectionFailed, match="cut short"):
            get(pool, "/")
        assert raw.accepted == 1  # the head had arrived: not a stale connection, no retry


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "café"])
def test_a_header_that_cannot_go_on_the_wire_is_refused(value: str, pools: Pools) -> None:
    with pytest.raises(InvalidRequest, match="cannot send"):
        pools("http://127.0.0.1:9").request("GET", "/", {"Authorization": value})


def test_an_unreachable_server_fails_at_once(pools: Pools) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with took_at_most(1.0), pytest.raises(ConnectionFailed, match="cannot reach"):
        get(pools(f"http://127.0.0.1:{port}"), "/")


# -- streaming both ways -----------------------------------------------------------------


def test_a_large_answer_streams_through_bounded_memory(server: Served, pools: Pools) -> None:
    pool = pools(server.url)
    expected = hashlib.sha256()
    for _ in range(50):
        expected.update(PATTERN)
    digest, size, largest = hashlib.sha256(), 0, 0
    tracemalloc.start()
    try:
        with took_at_most(15.0):
            chunks = pool.request("GET", "/big?mb=50", {}).iter_bytes()
            for chunk in chunks:
                server.app.release.set()  # the server holds the rest until this chunk came
                digest.update(chunk)
                size += len(chunk)
                largest = max(largest, len(chunk))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (size, digest.hexdigest()) == (50 * MIB, expected.hexdigest())
    assert largest <= 256 * 1024
    assert peak < 16 * MIB, f"peak {peak / MIB:.1f} MiB for a 50 MiB answer"
    assert echo(pool)["port"] == server.app.seen[0].port  # read to its end: reused


def test_an_abandoned_stream_leaves_the_pool_usable(server: Served, pools: Pools) -> None:
    pool = pools(server.url)
    resp = pool.request("GET", "/big?mb=50", {})
    chunks = resp.iter_bytes()
    next(chunks)
    # Another request while a stream is open gets its own connection.
    assert echo(pool, rid="meanwhile")["id"] == "meanwhile"
    with pytest.raises(RuntimeError, match="already being read"):
        resp.read()  # two readers of one body would each get part of it
    resp.close()
    assert echo(pool, rid="after")["id"] == "after"
    del chunks  # finalizing the abandoned reader must not touch the pool's connections
    assert echo(pool, rid="last")["id"] == "last"
    ports = [s.port for s in server.app.seen]
    assert ports[1] != ports[0] and ports[3] == ports[2] == ports[1]


def test_a_streamed_upload_is_sent_chunked(server: Served, pools: Pools) -> None:
    pool = pools(server.url)
    parts = [PATTERN[:1000], b"", PATTERN, PATTERN[:7]] * 3
    resp = pool.request("PUT", "/upload", {"Content-Type": "application/x-tar"}, iter(parts))
    got = json.loads(resp.read())
    assert got == {
        "size": sum(map(len, parts)),
        "sha256": hashlib.sha256(b"".join(parts)).hexdigest(),
        "te": "chunked",
    }


def test_an_early_answer_to_an_upload_is_read(server: Served, pools: Pools) -> None:
    """paddockd refuses a wrong token before reading the body: the refusal, not a broken
    pipe, is what the user must see."""
    pool = pools(server.url, write_timeout=5)
    body = (PATTERN for _ in range(64))
    with took_at_most(5.0):
        status, answer = get(pool, "/reject", "PUT", body=body)
    assert status == 413 and b"payload_too_large" in answer
    assert echo(pool)["method"] == "GET"


def test_an_answer_before_a_hang_up_mid_upload_is_read(pools: Pools) -> None:
    """A server may answer and close without reading an upload; the send then fails, but
    the answer is already here."""

    def refuse(server: RawServer, conn: socket.socket, index: int) -> None:
        server.read_head(conn)
        conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope!")

    with raw_server(refuse) as raw:
        body = (PATTERN for _ in range(64))
        with took_at_most(1.0):
            assert get(pools(raw.url), "/", "PUT", body=body) == (401, b"nope!")


def test_bytes_past_the_end_of_an_answer_retire_the_connection(pools: Pools) -> None:
    def junk(server: RawServer, conn: socket.socket, index: int) -> None:
        while server.read_head(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK")

    with raw_server(junk) as raw:
        pool = pools(raw.url)
        assert get(pool, "/") == (200, b"ok")
        assert get(pool, "/") == (200, b"ok")
        assert raw.accepted == 2


# -- threads -------------------------------------------------------------------------------


def test_threads_each_get_their_own_answers(server: Served, pools: Pools) -> None:
    pool = pools(server.url)

    def calls(worker: int) -> None:
        for i in range(25):
            rid = f"{worker}-{i}"
            delay = f"&delay=0.00{(worker + i) % 5}"
            payload = (rid * 50).encode()
            resp = pool.request("POST", f"/echo?id={rid}{delay}", {}, payload)
            got = json.loads(resp.read())
            assert (got["id"], got["body"]) == (rid, payload.decode())

    with took_at_most(10.0), ThreadPoolExecutor(8) as threads:
        for future in [threads.submit(calls, w) for w in range(8)]:
            future.result()
    assert len(server.app.seen) == 200
    assert len({s.port for s in server.app.seen}) <= 8  # at most one connection per thread


# -- through Client ---------------------------------------------------------------------------


def test_client_delete_answered_204_returns_at_once(server: Served) -> None:
    with Client(server.url, token="t") as client, took_at_most(KEEP_ALIVE / 2):
        for _ in range(3):
            client.delete_box("b1", force=True)
    assert [(s.method, s.path) for s in server.app.seen] == [("DELETE", "/v1/boxes/b1")] * 3
    assert server.app.seen[0].headers["authorization"] == "Bearer t"


def test_client_streams_have_no_read_timeout_and_calls_do(server: Served) -> None:
    with Client(server.url, token="t", timeout=0.3) as client:
        result = client.exec("b1", ["true"])  # quiet for 0.6 s twice
        assert (result.exit_code, result.stdout) == (0, "ab")
        with took_at_most(1.0), pytest.raises(ConnectionFailed, match="sent nothing"):
            client.get_box("slow")


# -- TLS -----------------------------------------------------------------------------------


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    return self_signed(tmp, "cert", ip="127.0.0.1")


def test_https_is_verified_and_kept_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pools: Pools
) -> None:
    pytest.importorskip("cryptography")
    cert, key = _self_signed(tmp_path)
    with serve(ssl_certfile=str(cert), ssl_keyfile=str(key)) as served:
        # An unknown issuer is refused...
        with pytest.raises(ConnectionFailed, match="TLS"):
            echo(pools(served.url))
        # ...a trusted one is used, and TLS 1.3's session tickets (bytes that arrive after
        # the handshake) do not make an idle connection look closed.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        pool = pools(served.url)
        ports = {echo(pool, rid=str(i))["port"] for i in range(3)}
        assert get(pool, "/empty", "DELETE") == (204, b"")
        assert len(ports) == 1
