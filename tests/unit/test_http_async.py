"""`AsyncClient` over the sync HTTP stack: a stream abandoned mid-read (cancelled, or left
by `break`) lets go of its connection and its worker thread at once, and the event loop is
never blocked while a request waits."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from paddock import AsyncClient, NotFound

from .test_http_client import RawServer, raw_server, took_at_most

pytestmark = pytest.mark.timeout(60)

EVENT = b'event: box-removed\ndata: {"id": "x"}\n\n'


def _one_event_then_silence(server: RawServer, conn: socket.socket, index: int) -> None:
    server.read_head(conn)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n"
    conn.sendall(head + b"%x\r\n%s\r\n" % (len(EVENT), EVENT))
    conn.settimeout(30)
    # The client's hang-up shows as EOF here: the test reads when it came.
    server.heads.append(b"closed" if conn.recv(1) == b"" else b"data")
    server.closed_at = time.monotonic()  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["cancel", "break"])
def test_an_abandoned_stream_lets_go_of_its_connection_at_once(how: str) -> None:
    with raw_server(_one_event_then_silence) as raw:

        async def follow() -> None:
            async with AsyncClient(raw.url, token="t") as c:
                async for kind, _ in c.follow_events():
                    assert kind == "box-removed"
                    if how == "break":
                        break
                    # "cancel": the next read waits in a worker thread for bytes that
                    # never come, and the cancel arrives there.

        async def scenario() -> float:
            task = asyncio.create_task(follow())
            while len(raw.heads) < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            if how == "cancel":
                task.cancel()
            left = time.monotonic()
            with pytest.raises(asyncio.CancelledError) if how == "cancel" else _nothing():
                await task
            return left

        with took_at_most(5.0):
            left = asyncio.run(scenario())
            deadline = time.monotonic() + 3
            while len(raw.heads) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert raw.heads[1:] == [b"closed"]
        assert raw.closed_at - left < 2.0  # type: ignore[attr-defined]


def _parked(server: RawServer, conn: socket.socket, index: int) -> None:
    server.read_head(conn)
    server.stop.wait(1.0)
    body = b'{"error": {"code": "not_found", "message": "no box x"}}'
    head = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
    conn.sendall(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def test_requests_wait_off_the_event_loop() -> None:
    """Ten requests the server holds for a second each end together, and the loop ticks
    meanwhile: none blocks it."""
    with raw_server(_parked) as raw:

        async def scenario() -> int:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.05)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            async with AsyncClient(raw.url, token="t") as c:
                results = await asyncio.gather(
                    *(c.get_box("x") for _ in range(10)), return_exceptions=True
                )
            ticker.cancel()
            assert all(isinstance(r, NotFound) for r in results), results
            return ticks

        with took_at_most(3.0):
            ticks = asyncio.run(scenario())
        assert ticks >= 10


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
