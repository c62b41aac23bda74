"""The credential gateway's two listeners on the bridge's address, which only boxes reach
(the rules redirect to them; see netpolicy/nftables.py):

- **providers** (the box's port 80 on the gateway address): a box's agents send their
  model requests to `http://GATEWAY/PROVIDER/...` with a placeholder for the key; the
  gateway swaps in the owner's key and forwards over TLS to the provider.
- **bound hosts** (the box's HTTPS to addresses of hosts its secrets are bound to): the
  TLS ClientHello's server name is read without taking a byte off the socket; for a bound
  host the gateway answers TLS with a certificate of its own CA, swaps the placeholders in
  the headers and forwards over TLS, verifying the host's real certificate. Any other
  name's TLS is passed through to where the box was going, never decrypted.

Each connection is charged to its box: at most `per_box` at once (and `total` for all)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import ssl
import struct
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import h11

from ..netpolicy.quotas import Slots
from .base import Asked, Denied, Grant, Grants
from .ca import Authority
from .relay import HOP, MAX_HEAD, Forward, Refusal, Relay, Target, UpstreamFailed
from .substitute import encodings, placeholders_in, substitute

log = logging.getLogger("paddockd.gateway")

SO_ORIGINAL_DST: Final = 80  # linux/netfilter_ipv4.h
_HELLO_MAX = 16 * 1024
_MORE: Final = "more"
PASS_IDLE = 300.0  # seconds a passed-through connection may sit silent
# Where a provider's key may stand in a request: its auth headers, nowhere an error
# message could quote back.
KEY_HEADERS = frozenset({b"x-api-key", b"authorization", b"api-key"})
_NAME_RE = re.compile(r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$")


def client_context(ca_file: Path | None) -> ssl.SSLContext:
    """TLS to the real hosts: the system's trust store (plus `ca_file`), HTTP/1.1."""
    ctx = ssl.create_default_context()
    if ca_file is not None:
        ctx.load_verify_locations(cafile=str(ca_file))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def server_name(hello: bytes) -> str | None:
    """The server name a ClientHello asks for; None for none (or not TLS at all); `_MORE`
    while the hello is incomplete. Read by the ssl module, which stops at the name."""
    seen: list[str | None] = []

    def named(_obj: object, name: str | None, _ctx: object) -> int:
        seen.append(name)
        return ssl.ALERT_DESCRIPTION_HANDSHAKE_FAILURE  # stop here: nothing is answered

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sni_callback = named
    incoming = ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, ssl.MemoryBIO(), server_side=True)
    incoming.write(hello)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        return seen[0] if seen else _MORE
    except ssl.SSLError:
        pass
    name = seen[0] if seen else None
    return name.lower().rstrip(".") if name else None


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """Where a redirected connection was going (the kernel's NAT record)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port = struct.unpack_from("!H", raw, 2)[0]
    return socket.inet_ntoa(raw[4:8]), port


def _record_wanted(data: bytes) -> int:
    """How many bytes the first TLS record takes (header and body); 0 if `data` does not
    start a TLS handshake record at all."""
    if len(data) < 5:
        return 5
    if data[0] != 0x16:  # not a handshake: not TLS
        return 0
    return 5 + int.from_bytes(data[3:5], "big")


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def woken() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), woken)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def _peek_name(sock: socket.socket, timeout: float) -> str | None:
    """The server name of the ClientHello waiting on `sock`, read with MSG_PEEK: the bytes
    stay for whoever reads the socket next (TLS here, or the real host). The hello is
    parsed once its whole first record is in (a box dripping it costs a wait, not work)."""
    loop = asyncio.get_running_loop()
    pause = 0.005
    async with asyncio.timeout(timeout):
        while True:
            await _readable(loop, sock)
            data = sock.recv(_HELLO_MAX, socket.MSG_PEEK)
            if not data:
                return None
            wanted = _record_wanted(data)
            if wanted == 0 or wanted > _HELLO_MAX:
                return None
            if len(data) >= wanted:
                name = server_name(data)
                return None if name == _MORE else name
            # Level-triggered: the bytes already there wake us again; wait for more.
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.2)


async def _streams(
    sock: socket.socket, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_HEAD)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_accepted_socket(
        lambda: protocol, sock, ssl=tls, ssl_handshake_timeout=10 if tls else None
    )
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, idle: float = PASS_IDLE
) -> None:
    """Bytes one way until the end (passed on as a half-close) or `idle` seconds of
    silence."""
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        while True:
            async with asyncio.timeout(idle):
                data = await reader.read(65536)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            async with asyncio.timeout(idle):
                await writer.drain()


def _refusal(denied: Denied) -> Refusal:
    return Refusal(denied.status, denied.code, denied.message)


def _asked(box_ip: str, request: h11.Request) -> Asked:
    path = request.target.partition(b"?")[0].decode("ascii", "replace")
    return Asked(
        box_ip,
        request.method.decode("ascii", "replace"),
        path[:255],
        frozenset(placeholders_in(list(request.headers))),
    )


def _masks(grant: Grant) -> dict[bytes, bytes]:
    masks = {}
    reals = [r for swap in grant.swaps.values() for r in (swap.value, swap.formatted)]
    for real in [*reals, *grant.masked]:
        for form in encodings(real) if real else ():
            masks[form] = b"*" * len(form)
    return masks


def _forwarded(headers: list[tuple[bytes, bytes]], grant: Grant) -> list[tuple[bytes, bytes]]:
    """Headers for the upstream: no hop-by-hop ones, the grant's own set over the box's
    of those names; with a value in, the answer asked for unencoded (a compressed echo of
    it could not be masked)."""
    replaced = {k.lower() for k, _ in grant.headers}
    out = [(k, v) for k, v in headers if k.lower() not in HOP and k.lower() not in replaced]
    out.extend((k, v) for k, v in grant.headers if k.lower() not in HOP)
    if grant.swaps or grant.masked:
        out = [(k, v) for k, v in out if k.lower() != b"accept-encoding"]
        out.append((b"accept-encoding", b"identity"))
    return out


def _on_status(grant: Grant) -> Callable[[int], None] | None:
    return grant.record


class CredentialGateway:
    def __init__(
        self,
        grants: Grants,
        authority: Authority,
        *,
        ca_file: Path | None = None,
        per_box: int = 32,
        total: int = 2048,
        connect_timeout: float = 10.0,
        first_request: float = 30.0,
    ) -> None:
        self._first_request = first_request
        self._grants = grants
        self._ca = authority
        self._client_tls = client_context(ca_file)
        self._slots = Slots(per_box, total)
        self._connect_timeout = connect_timeout
        self._server: asyncio.Server | None = None
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int, intercept_port: int) -> None:
        await self._grants.refresh()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, intercept_port))
            listener.listen(512)
            listener.setblocking(False)
            self._server = await asyncio.start_server(
                self._serve_provider, host, port, reuse_address=True, limit=MAX_HEAD
            )
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._spawn(self._accept_intercepted(listener))
        log.info("credential gateway on %s:%d (bound hosts: %d)", host, port, intercept_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- providers ----------------------------------------------------------------------
    async def _serve_provider(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        ip = writer.get_extra_info("peername")[0]
        if not self._grants.is_box(ip) or not self._slots.acquire(ip):
            writer.transport.abort()
            return
        try:
            relay = Relay(
                partial(self._provider_request, ip),
                self._connect,
                first_request=self._first_request,
            )
            await relay.serve(reader, writer)
        finally:
            self._slots.release(ip)

    async def _provider_request(self, ip: str, request: h11.Request) -> Forward | Refusal:
        path, _, query = request.target.partition(b"?")
        _, _, rest = path.partition(b"/")
        provider, _, tail = rest.partition(b"/")
        grant = await self._grants.for_provider(
            _asked(ip, request), provider.decode("ascii", "replace")
        )
        if isinstance(grant, Denied):
            return _refusal(grant)
        assert grant.upstream is not None
        up = urlsplit(grant.upstream)
        tls = up.scheme == "https"
        host = up.hostname or ""
        target = Target(host, up.port or (443 if tls else 80), tls, host)
        new_path = up.path.rstrip("/").encode() + b"/" + tail + (b"?" + query if query else b"")
        swapped = substitute(list(request.headers), grant.swaps, KEY_HEADERS)
        if swapped.misplaced:
            why = "a placeholder may stand only in x-api-key or Authorization"
            return Refusal(400, "invalid_request", why)
        headers = [(k, v) for k, v in _forwarded(swapped.headers, grant) if k.lower() != b"host"]
        headers.insert(0, (b"host", up.netloc.rpartition("@")[2].encode()))
        forwarded = h11.Request(method=request.method, target=new_path, headers=headers)
        return Forward(target, forwarded, _masks(grant), _on_status(grant))

    async def _connect(self, target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        address = await self._grants.address_of(target.host, target.port)
        if isinstance(address, Denied):
            raise UpstreamFailed(address.message)
        return await self._open(address, target)

    async def _open(
        self, address: str, target: Target
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await asyncio.open_connection(
                    address,
                    target.port,
                    ssl=self._client_tls if target.tls else None,
                    server_hostname=target.server_name if target.tls else None,
                    limit=MAX_HEAD,
                )
        except ssl.SSLCertVerificationError as exc:
            raise UpstreamFailed(
                f"{target.server_name}'s certificate was not trusted ({exc.verify_message})"
            ) from None
        except (OSError, TimeoutError) as exc:
            raise UpstreamFailed(
                f"could not reach {target.server_name}:{target.port} ({exc or 'timed out'})"
            ) from None

    # -- bound hosts ----------------------------------------------------------------------
    async def _accept_intercepted(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as exc:
                log.warning("gateway: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._spawn(self._intercepted(sock, peer[0]))

    async def _intercepted(self, sock: socket.socket, ip: str) -> None:
        if not self._grants.is_box(ip) or not self._slots.acquire(ip):
            sock.close()
            return
        try:
            sock.setblocking(False)
            host, port = original_destination(sock)
            try:
                name = await _peek_name(sock, 10.0)
            except (TimeoutError, OSError):
                sock.close()
                return
            pattern = (
                self._grants.binding(ip, name)
                if name is not None and _NAME_RE.match(name)
                else None
            )
            if name is not None and pattern is not None:
                await self._terminate(sock, ip, name, pattern, host, port)
            else:
                await self._pass_through(sock, ip, host, port)
        except Exception as exc:  # one box's connection never takes the listener down
            log.error("gateway: a connection from %s failed (%s)", ip, type(exc).__name__)
            sock.close()
        finally:
            self._slots.release(ip)

    async def _terminate(
        self, sock: socket.socket, ip: str, name: str, pattern: str, host: str, port: int
    ) -> None:
        checked = await self._grants.address_of(host, port)
        if isinstance(checked, Denied):
            sock.close()
            return
        # One certificate per bound pattern (a wildcard's covers all its names), made off
        # the event loop: a box naming many hosts costs no more than one.
        context = await asyncio.to_thread(self._ca.server_context, pattern)
        try:
            reader, writer = await _streams(sock, context)
        except (ssl.SSLError, OSError, TimeoutError):
            sock.close()  # the box did not trust the gateway's CA, or went away
            return
        target = Target(checked, port, True, name)

        async def connect(_: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await self._open(checked, target)

        relay = Relay(
            partial(self._host_request, ip, name, port, target),
            connect,
            first_request=self._first_request,
        )
        await relay.serve(reader, writer)

    async def _host_request(
        self, ip: str, name: str, port: int, target: Target, request: h11.Request
    ) -> Forward | Refusal:
        given = next((v for k, v in request.headers if k.lower() == b"host"), b"")
        if given.lower().rstrip(b".") not in (name.encode(), f"{name}:{port}".encode()):
            return Refusal(
                421,
                "misdirected_request",
                f"this connection is for {name}; its requests must name it as their Host",
            )
        grant = await self._grants.for_host(_asked(ip, request), name)
        if isinstance(grant, Denied):
            return _refusal(grant)
        headers = _forwarded(substitute(list(request.headers), grant.swaps).headers, grant)
        forwarded = h11.Request(method=request.method, target=request.target, headers=headers)
        return Forward(target, forwarded, _masks(grant), _on_status(grant))

    async def _pass_through(self, sock: socket.socket, ip: str, host: str, port: int) -> None:
        """Not a bound host: the bytes go where the box sent them, untouched, as far as
        the box's policy lets it go now (a box switched to deny-all goes nowhere)."""
        checked = await self._grants.address_of(host, port)
        if isinstance(checked, Denied) or not self._grants.egress(ip):
            sock.close()
            return
        box_reader, box_writer = await _streams(sock)
        try:
            async with asyncio.timeout(self._connect_timeout):
                up_reader, up_writer = await asyncio.open_connection(checked, port)
        except (OSError, TimeoutError):
            box_writer.transport.abort()
            return
        try:
            await asyncio.gather(_pipe(box_reader, up_writer), _pipe(up_reader, box_writer))
        finally:
            box_writer.transport.abort()
            up_writer.transport.abort()
