"""The engine upload: the body arrives whole and in order, chunked; an engine that
answers early (a refusal) is heard, not written into forever; a cut answer is an error."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import h11
import pytest

from paddockd.runtime import upload


def engine(path: Path, answer: Callable[[h11.Connection, socket.socket], None]) -> None:
    """A one-request server on a unix socket: `answer` reads and replies."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            answer(h11.Connection(h11.SERVER), conn)

    threading.Thread(target=serve, daemon=True).start()


def read_request(conn: h11.Connection, sock: socket.socket) -> tuple[h11.Request, bytes]:
    request, body = None, bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(65536))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)


def reply(conn: h11.Connection, sock: socket.socket, status: int, body: bytes) -> None:
    headers = [("Content-Length", str(len(body))), ("Content-Type", "application/json")]
    head = conn.send(h11.Response(status_code=status, headers=headers))
    sock.sendall(head + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))


async def pieces(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_the_body_arrives_whole_and_the_answer_is_read(tmp_path: Path) -> None:
    parts = [os.urandom(n) for n in (1, 0, 70000, 1 << 20, 3)]
    seen: dict[str, object] = {}

    def answer(conn: h11.Connection, sock: socket.socket) -> None:
        request, body = read_request(conn, sock)
        seen.update(target=request.target, headers=dict(request.headers), body=body)
        reply(conn, sock, 200, b"")

    engine(tmp_path / "e.sock", answer)
    status, _ = anyio.run(
        upload.put,
        str(tmp_path / "e.sock"),
        "/v1.41/x?path=%2Fa",
        "application/x-tar",
        pieces(parts),
    )
    assert status == 200
    assert seen["target"] == b"/v1.41/x?path=%2Fa"
    assert seen["body"] == b"".join(parts)
    assert seen["headers"][b"transfer-encoding"] == b"chunked"  # type: ignore[index]


def test_an_early_refusal_is_heard(tmp_path: Path) -> None:
    def answer(conn: h11.Connection, sock: socket.socket) -> None:
        sock.recv(1024)  # the request's head; the body is never read
        reply(conn, sock, 404, b'{"message": "No such container: x"}')
        sock.shutdown(socket.SHUT_RDWR)

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield bytes(1 << 20)

    engine(tmp_path / "e.sock", answer)
    status, text = anyio.run(
        upload.put, str(tmp_path / "e.sock"), "/x", "application/x-tar", endless()
    )
    assert (status, upload.message(text)) == (404, "No such container: x")


def test_a_cut_answer_is_an_error(tmp_path: Path) -> None:
    def answer(conn: h11.Connection, sock: socket.socket) -> None:
        read_request(conn, sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")

    engine(tmp_path / "e.sock", answer)
    with pytest.raises(ConnectionError, match="cut short"):
        anyio.run(upload.put, str(tmp_path / "e.sock"), "/x", "application/x-tar", pieces([b"a"]))
