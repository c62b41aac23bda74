"""HTTP/1.1 between a box and an upstream, framed by h11 on both sides: each request the
box sends is decided on (forwarded with its headers rewritten, or refused with a JSON
error), its body and the answer stream through as they come (SSE included), and anything
of the real secret an upstream sends back is masked before it reaches the box.

Everything read from the box is bounded: a request head of at most 64 KiB, the whole head
within `first_request` seconds (then `idle` for each next one), a request framed one way
only (Content-Length and Transfer-Encoding together is how requests are smuggled past a
proxy), no trailers passed on. An answer to a request that carried a real value must come
unencoded (the gateway asks for identity): a compressed echo could not be masked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11

log = logging.getLogger("paddockd.gateway")

MAX_HEAD = 64 * 1024
_CHUNK = 64 * 1024
# Headers about one hop, never passed on (RFC 9110 §7.6.1); h11 frames each side itself.
HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"}
    | {b"proxy-authorization", b"proxy-authenticate"}
)


@dataclass(frozen=True)
class Target:
    """Where a request goes: host and port to connect to, and TLS (verified against
    `server_name`) or not."""

    host: str
    port: int
    tls: bool
    server_name: str


@dataclass(frozen=True)
class Forward:
    target: Target
    request: h11.Request
    # Real values an answer may echo, each with the mask (same length) the box gets.
    masks: dict[bytes, bytes] = field(default_factory=dict)
    # Called with the upstream's status once the answer's head is in (records the use).
    on_status: Callable[[int], None] | None = None


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


Decide = Callable[[h11.Request], Awaitable[Forward | Refusal]]
Connect = Callable[[Target], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class UpstreamFailed(Exception):
    """The upstream could not be reached or broke off; the message is for the box."""


class Masker:
    """Replaces each real value in a stream of chunks with its mask, across chunk
    boundaries: a chunk's end that could begin a value is held back until the next chunk
    tells (and only that: an event stream's events are never held up by it)."""

    def __init__(self, masks: dict[bytes, bytes]) -> None:
        self._masks = {k: v for k, v in masks.items() if k}
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        if not self._masks:
            return data
        data = self._apply(self._held + data)
        keep = self._partial(data)
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def _partial(self, data: bytes) -> int:
        """How many bytes at the end of `data` are the start of a value: only where the
        value's first byte stands in that tail is there anything to compare."""
        longest = 0
        for real in self._masks:
            at = data.find(real[:1], max(len(data) - len(real) + 1, 0))
            while at != -1:
                n = len(data) - at
                if n > longest and real.startswith(data[at:]):
                    longest = n
                    break  # the earliest start is the longest
                at = data.find(real[:1], at + 1)
        return longest

    def flush(self) -> bytes:
        out, self._held = self._held, b""
        return out

    def _apply(self, data: bytes) -> bytes:
        for real, mask in self._masks.items():
            data = data.replace(real, mask)
        return data

    def headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        return [(k, self._apply(v)) for k, v in headers]


class _Side:
    """One h11 connection and its stream."""

    def __init__(
        self,
        role: type[h11.CLIENT] | type[h11.SERVER],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        write_timeout: float,
    ) -> None:
        self.conn = h11.Connection(role, max_incomplete_event_size=MAX_HEAD)
        self.reader = reader
        self.writer = writer
        self._write_timeout = write_timeout  # a peer that reads nothing is let go

    async def next(self, timeout: float | None) -> object:
        """The next h11 event (or PAUSED), reading as it needs."""
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout(timeout):
                data = await self.reader.read(_CHUNK)
            self.conn.receive_data(data)

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            self.writer.write(data)
            async with asyncio.timeout(self._write_timeout):
                await self.writer.drain()

    def close(self) -> None:
        self.writer.transport.abort()


def passed_on(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP]


async def _refuse(box: _Side, refusal: Refusal) -> None:
    body = json.dumps({"error": {"code": refusal.code, "message": refusal.message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
        await box.send(h11.Response(status_code=refusal.status, headers=headers))
        await box.send(h11.Data(data=body))
        await box.send(h11.EndOfMessage())


class Relay:
    """Serves one box connection until either side closes or breaks the protocol."""

    def __init__(
        self,
        decide: Decide,
        connect: Connect,
        *,
        first_request: float = 30.0,
        idle: float = 120.0,
        answer: float = 600.0,
    ) -> None:
        self._decide = decide
        self._connect = connect
        self._first = first_request
        self._idle = idle
        self._answer = answer  # longest wait for any piece of an answer (a slow model)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        box = _Side(h11.SERVER, reader, writer, self._idle)
        up: _Side | None = None
        up_target: Target | None = None
        wait = self._first
        try:
            while True:
                try:
                    async with asyncio.timeout(wait):  # the whole head, however it drips
                        event = await box.next(None)
                except (TimeoutError, h11.RemoteProtocolError, ConnectionError):
                    return
                if not isinstance(event, h11.Request):
                    return  # ConnectionClosed, or garbage
                verdict = _malformed(event) or await self._decided(event)
                if isinstance(verdict, Refusal):
                    await _refuse(box, verdict)
                    return
                if up is None or up_target != verdict.target:
                    if up is not None:
                        up.close()
                    try:
                        up = _Side(h11.CLIENT, *await self._connect(verdict.target), self._idle)
                    except UpstreamFailed as exc:
                        up = None
                        await _refuse(box, Refusal(502, "gateway_upstream", str(exc)))
                        return
                    up_target = verdict.target
                if not await self._exchange(box, up, verdict):
                    return
                box.conn.start_next_cycle()
                up.conn.start_next_cycle()
                wait = self._idle
        finally:
            if up is not None:
                up.close()
            box.close()

    async def _decided(self, request: h11.Request) -> Forward | Refusal:
        try:
            return await self._decide(request)
        except Exception as exc:
            # Never the exception's text: it may quote a value being swapped in.
            log.error("gateway: a request could not be decided on (%s)", type(exc).__name__)
            return Refusal(500, "gateway_error", "the gateway failed on this request")

    async def _exchange(self, box: _Side, up: _Side, forward: Forward) -> bool:
        """One request and its answer; whether both connections can carry another."""
        try:
            await up.send(forward.request)
        except (TimeoutError, ConnectionError, h11.LocalProtocolError) as exc:
            why = f"the upstream went away ({type(exc).__name__})"
            await _refuse(box, Refusal(502, "gateway_upstream", why))
            return False
        body = asyncio.create_task(self._request_body(box, up))
        try:
            answered = await self._answer_to(box, up, forward)
        except (TimeoutError, ConnectionError, h11.ProtocolError) as exc:
            log.info("gateway: an answer from %s broke off: %s", forward.target.host, exc)
            answered = False
        finally:
            if not body.done():
                body.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await body
        whole = body.done() and not body.cancelled() and body.exception() is None
        return answered and whole and body.result() and _reusable(box) and _reusable(up)

    async def _request_body(self, box: _Side, up: _Side) -> bool:
        while True:
            event = await box.next(self._idle)
            if isinstance(event, h11.Data):
                await up.send(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                await up.send(h11.EndOfMessage())  # trailers are not passed on
                return True
            else:
                return False

    async def _answer_to(self, box: _Side, up: _Side, forward: Forward) -> bool:
        masker = Masker(forward.masks)
        while True:
            event = await up.next(self._answer)
            if isinstance(event, h11.InformationalResponse):
                if event.status_code == 100:
                    await box.send(h11.InformationalResponse(status_code=100, headers=[]))
                continue
            if isinstance(event, h11.Response):
                if forward.masks and _encoded(event):
                    await _refuse(box, Refusal(502, "gateway_upstream", _ENCODED))
                    return False
                if forward.on_status is not None:
                    forward.on_status(event.status_code)
                headers = masker.headers(passed_on(list(event.headers)))
                await box.send(
                    h11.Response(
                        status_code=event.status_code, headers=headers, reason=event.reason
                    )
                )
            elif isinstance(event, h11.Data):
                data = masker.feed(bytes(event.data))
                if data:
                    await box.send(h11.Data(data=data))
            elif isinstance(event, h11.EndOfMessage):
                rest = masker.flush()
                if rest:
                    await box.send(h11.Data(data=rest))
                await box.send(h11.EndOfMessage())
                return True
            else:
                raise ConnectionError("the upstream closed before its answer ended")


_ENCODED = (
    "the upstream answered compressed although asked not to: the gateway passes only "
    "answers it can check for the value"
)


def _malformed(request: h11.Request) -> Refusal | None:
    names = [k for k, _ in request.headers]
    if request.method == b"CONNECT" or b"upgrade" in names:
        return Refusal(501, "not_supported", "the gateway relays plain HTTP/1.1")
    if b"content-length" in names and b"transfer-encoding" in names:
        why = "a request has a Content-Length or a Transfer-Encoding, not both"
        return Refusal(400, "invalid_request", why)
    if not (request.target.startswith(b"/") or request.target == b"*"):
        return Refusal(400, "invalid_request", "the request target must be a path (origin form)")
    return None


def _encoded(response: h11.Response) -> bool:
    return any(
        k == b"content-encoding" and v.strip().lower() not in (b"", b"identity")
        for k, v in response.headers
    )


def _reusable(side: _Side) -> bool:
    c = side.conn
    return c.our_state is h11.DONE and c.their_state is h11.DONE
