"""An exec's attach stream read and written on the event loop: no thread per chunk.

Reading the engine's socket through a worker thread costs a thread hop for every frame
the engine sends (a few KiB each); with dozens of streams at once that hop, not the
bytes, was paddockd's throughput limit. Here the socket is non-blocking, large reads
are split into frames as they arrive, and consecutive frames of one stream leave as one.
With many streams at once, each waits a moment between reads so that reads are big:
paddockd's cost is per read, not per byte.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel

from .base import STDOUT

HEADER = 8  # stream (1 byte), 3 zero bytes, payload size (4 bytes, big-endian)
READ_SIZE = 256 * 1024
FULL_READ = 128 * 1024  # about what the engine's socket buffer holds
BUSY_READERS = 4  # streams read at once from which batching pays
BATCH_WAIT = 0.01
_readers = 0  # streams being read now (all on the one event loop)


class Demux:
    """The engine's multiplexed (non-TTY) stream, fed as bytes arrive: complete frames
    come out as (stream, payload), a frame cut by a read waits for its rest."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        buf, pos, out = self._buf, 0, []
        parts: list[bytes] = []
        kind = -1
        while len(buf) - pos >= HEADER:
            size = int.from_bytes(buf[pos + 4 : pos + HEADER], "big")
            if len(buf) - pos - HEADER < size:
                break
            stream = buf[pos] or STDOUT  # stdin echoed back (0) reads as output
            if stream != kind and parts:
                out.append((kind, b"".join(parts)))
                parts = []
            kind = stream
            if size:
                parts.append(bytes(buf[pos + HEADER : pos + HEADER + size]))
            pos += HEADER + size
        if parts:
            out.append((kind, b"".join(parts)))
        del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet complete."""
        return len(self._buf)


async def recv(sock: socket.socket) -> bytes:
    """The next bytes from a non-blocking socket (b"" at its end)."""
    while True:
        try:
            return sock.recv(READ_SIZE)
        except (BlockingIOError, ssl.SSLWantReadError):
            await anyio.wait_readable(sock)
        except OSError:  # reset, or closed under us: the stream ended (wait() says how)
            return b""


async def send_all(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view)
        except (BlockingIOError, ssl.SSLWantWriteError):
            await anyio.wait_writable(sock)
            continue
        view = view[sent:]


async def output(sock: socket.socket, tty: bool) -> AsyncIterator[tuple[int, bytes]]:
    """(stream, bytes) until the engine closes the stream; a TTY's output is one stream.

    Every read gives the event loop a turn: `recv` waits only when the socket is empty, and
    a box that prints without pause keeps it full, so a reader that awaits nothing else
    (a buffered exec, a watcher's pump) would otherwise hold the loop, and all of paddockd,
    for as long as the box goes on."""
    global _readers
    sock.setblocking(False)
    demux = None if tty else Demux()
    _readers += 1
    try:
        while data := await recv(sock):
            if demux is None:
                yield STDOUT, data
            else:
                for item in demux.feed(data):
                    yield item
            if _readers >= BUSY_READERS and len(data) < FULL_READ:
                # Many streams at once: let this one's socket fill while the others are
                # served (after passing on what came, so a lone keystroke's echo is not
                # held). Each read costs paddockd ~0.1 ms whatever its size; reads of a
                # frame or two made 50 streams CPU-bound at 0.66x the engine's
                # throughput. A read that nearly filled the engine's socket buffer goes
                # on at once (waiting would stall the command), and so does a stream
                # read alone: batching pays only where the CPU is shared out.
                await anyio.sleep(BATCH_WAIT)
            else:
                await anyio.lowlevel.checkpoint()
    finally:
        _readers -= 1
