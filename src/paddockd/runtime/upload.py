"""A streamed request body to the engine, sent from the event loop.

docker-py sends a generator body through `requests` in a worker thread, which pulls each
piece back from the event loop (two thread hops a piece) and copies it once more to
frame it. A push of many MiB spent more time there than in moving its bytes; here each
piece goes from the client's request straight onto the engine's socket.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import h11

_READ = 64 * 1024


async def put(
    socket_path: str, target: str, content_type: str, chunks: AsyncIterator[bytes]
) -> tuple[int, str]:
    """PUT `chunks` (chunked encoding) to `target` on the engine's unix socket; the
    answer's status and text. Should the engine answer before taking the whole body (a
    refusal), the rest is not sent and the answer is still read."""
    conn = h11.Connection(h11.CLIENT)
    headers = [
        ("Host", "docker"),
        ("Content-Type", content_type),
        ("Transfer-Encoding", "chunked"),
    ]
    async with await anyio.connect_unix(socket_path) as stream:
        await stream.send(conn.send(h11.Request(method="PUT", target=target, headers=headers)))
        try:
            async for chunk in chunks:
                if chunk:
                    for piece in conn.send_with_data_passthrough(h11.Data(data=chunk)) or ():
                        await stream.send(piece)
            await stream.send(conn.send(h11.EndOfMessage()))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the engine stopped reading: its answer says why
        return await _answer(conn, stream)


async def _answer(conn: h11.Connection, stream: anyio.abc.ByteStream) -> tuple[int, str]:
    status, body = 0, bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise ConnectionError(f"the engine's answer was cut short: {exc}") from exc
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(_READ)
            except anyio.EndOfStream:
                data = b""
            conn.receive_data(data)
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, body.decode(errors="replace")


def message(text: str) -> str:
    """The engine's error message from its JSON answer (or the text as it is)."""
    try:
        return str(json.loads(text)["message"])
    except (ValueError, KeyError, TypeError):
        return text.strip()
