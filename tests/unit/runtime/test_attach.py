"""The engine's attach stream read on the event loop: frames split anywhere by reads,
merged per stream, TTY output passed through, and writes that outlast a full buffer."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import struct
import threading
import time

import anyio
import pytest

from paddockd.runtime import attach
from paddockd.runtime.base import STDERR, STDOUT


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def test_frames_cut_at_every_byte_come_out_whole_and_in_order() -> None:
    wire = (
        frame(1, b"out1") + frame(1, b"out2") + frame(2, b"err") + frame(1, b"") + frame(1, b"out3")
    )
    for cut in range(len(wire) + 1):
        demux = attach.Demux()
        got = demux.feed(wire[:cut]) + demux.feed(wire[cut:])
        joined: dict[int, bytes] = {}
        for kind, data in got:
            joined[kind] = joined.get(kind, b"") + data
        assert joined == {STDOUT: b"out1out2out3", STDERR: b"err"}, cut
        assert demux.pending == 0


def test_consecutive_frames_of_one_stream_leave_as_one() -> None:
    demux = attach.Demux()
    wire = frame(1, b"a") + frame(1, b"b") + frame(2, b"c") + frame(2, b"d") + frame(1, b"e")
    assert demux.feed(wire) == [(STDOUT, b"ab"), (STDERR, b"cd"), (STDOUT, b"e")]


def test_an_incomplete_frame_waits_for_its_rest() -> None:
    demux = attach.Demux()
    wire = frame(2, b"x" * 1000)
    assert demux.feed(wire[:500]) == []
    assert demux.pending == 500
    assert demux.feed(wire[500:]) == [(STDERR, b"x" * 1000)]


def test_stdin_echo_reads_as_stdout() -> None:
    assert attach.Demux().feed(frame(0, b"typed")) == [(STDOUT, b"typed")]


@pytest.mark.parametrize("tty", [False, True])
def test_a_stream_of_megabytes_over_a_socket_arrives_whole(tty: bool) -> None:
    rng = random.Random(7)
    chunks = [os.urandom(rng.randint(1, 40000)) for _ in range(200)]
    left, right = socket.socketpair()

    def engine() -> None:
        with right:
            for i, chunk in enumerate(chunks):
                right.sendall(chunk if tty else frame(1 + i % 2, chunk))

    threading.Thread(target=engine, daemon=True).start()

    async def read() -> dict[int, bytes]:
        got: dict[int, bytes] = {}
        async for kind, data in attach.output(left, tty):
            got[kind] = got.get(kind, b"") + data
        return got

    got = anyio.run(read)
    left.close()
    if tty:
        assert got == {STDOUT: b"".join(chunks)}
    else:
        assert got == {STDOUT: b"".join(chunks[0::2]), STDERR: b"".join(chunks[1::2])}


def test_many_streams_at_once_are_batched_and_arrive_whole() -> None:
    """Six streams pouring at once take the batching path (attach.BUSY_READERS): each
    still arrives whole and in order, and reads get bigger than the writes that fed them."""
    streams = 6
    payloads = [os.urandom(2 << 20) for _ in range(streams)]
    pairs = [socket.socketpair() for _ in range(streams)]
    reads: list[int] = []

    def engine(sock: socket.socket, data: bytes) -> None:
        with sock:
            for at in range(0, len(data), 16384):
                sock.sendall(frame(1, data[at : at + 16384]))

    for (_, right), data in zip(pairs, payloads, strict=True):
        threading.Thread(target=engine, args=(right, data), daemon=True).start()

    async def read(sock: socket.socket, into: list[bytes]) -> None:
        async for _, data in attach.output(sock, False):
            into.append(data)
            reads.append(len(data))

    async def all_of_them() -> list[list[bytes]]:
        got: list[list[bytes]] = [[] for _ in range(streams)]
        async with anyio.create_task_group() as tg:
            for (left, _), into in zip(pairs, got, strict=True):
                tg.start_soon(read, left, into)
        return got

    got = anyio.run(all_of_them)
    for (left, _), data, parts in zip(pairs, payloads, got, strict=True):
        left.close()
        assert b"".join(parts) == data
    assert max(reads) > 16384  # frames were merged: a read took more than one write
    assert attach._readers == 0


def test_send_all_waits_for_a_full_buffer_to_drain() -> None:
    left, right = socket.socketpair()
    left.setblocking(False)
    data = os.urandom(8 << 20)  # far more than a socket buffer holds
    received = bytearray()

    def reader() -> None:
        with right:
            while len(received) < len(data):
                received.extend(right.recv(1 << 16))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    anyio.run(attach.send_all, left, data)
    thread.join(10)
    left.close()
    assert bytes(received) == data


def test_a_stream_that_never_pauses_leaves_the_event_loop_turns() -> None:
    """A box that prints without pause keeps the socket full, so a read never has to wait;
    a reader that awaits nothing else must still let the rest of paddockd run."""
    left, right = socket.socketpair()
    stop = threading.Event()

    def box() -> None:
        chunk = b"y" * (1 << 20)
        with contextlib.suppress(OSError):
            while not stop.is_set():
                right.sendall(chunk)

    threading.Thread(target=box, daemon=True).start()

    async def main() -> float:
        ticks: list[float] = []

        async def other_work() -> None:
            while True:
                ticks.append(time.monotonic())
                await anyio.sleep(0.01)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_work)
            await anyio.sleep(0)  # the other task's first tick
            ticks.clear()
            async for _ in attach.output(left, True):
                time.sleep(0.0005)  # the reader's own work: the box outpaces it
                if time.monotonic() - started > 1.5:
                    break
            tg.cancel_scope.cancel()
        return len(ticks)

    try:
        ticks = anyio.run(main)
    finally:
        stop.set()
        left.close()
        right.close()
    assert ticks >= 20, f"the rest of the loop ran {ticks} times in 1.5 s of output"
