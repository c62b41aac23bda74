"""A blocking HTTP/1.1 client for the sync `Client`: h11 frames the messages, we own the sockets.

Why not httpx here: importing httpx costs ~200 ms on a small VPS, which would double the
cost of `paddock exec BOX -- true` (the Docker CLI does the same in ~80 ms). h11 — the
sans-IO HTTP/1.1 engine under httpx and uvicorn — decides where every message starts and
ends (Content-Length, chunked, close-delimited, and the answers that never have a body:
1xx, 204, 304 and any answer to HEAD, RFC 9112 §6.3). This module owns only the policy
around it:

- **A pool, not a shared socket.** A request checks a connection out and the response
  gives it back once its body has been read to the end (or closes it when abandoned), so
  threads never share one — `paddock mcp` calls the client from worker threads — and a
  caller may start a request while it still reads a stream.
- **Timeouts on every socket operation.** Connect, write (each send) and read (each recv:
  the longest silence allowed). A request may pass `read_timeout=None` to wait as long as
  the server takes between chunks: exec output, `--follow` streams.
- **Stale keep-alive connections.** A server closes idle connections after its keep-alive
  timeout (uvicorn: 5 s). Before reusing one, a zero-timeout poll tells whether it has
  become readable, which for an idle connection means EOF (or junk): it is dropped and the
  request goes out on another one, whatever its method. Should the server close it in the
  instant between that check and the request, an idempotent request (RFC 9110 §9.2.2) with
  a replayable body is sent once more on a fresh connection — only if no byte of an answer
  had arrived. POST and PATCH never are: the server may have acted on them.

- **Proxies.** With HTTPS_PROXY (https://) or HTTP_PROXY (http://) set and the server
  not exempted by NO_PROXY (`_proxy` decides), each connection is a CONNECT tunnel through
  the proxy, and TLS runs inside it with the server's own name. Plain HTTP is tunnelled
  too, not forwarded in absolute form: exec streams then pass through untouched and the
  WebSocket sessions take the same road.

The async client drives this same stack from asyncio (`_http_async`).
"""

from __future__ import annotations

import _thread
import select
import socket
from urllib.parse import urlsplit

import h11

from ._proxy import PROXY_FAILED, authority, from_env
from .wire.errors import ConnectionFailed, InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from collections.abc import Iterable, Iterator

    from ._proxy import Proxy

# Bytes asked of the kernel per recv: large enough for throughput on pulls, small enough
# that a streamed body never sits in memory as a whole.
_CHUNK = 256 * 1024
# Methods a client may repeat without changing the outcome (RFC 9110 §9.2.2).
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# Servers (and some proxies) answer 411 to a bodiless request of these without a length.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _Unset:
    """The type of `UNSET`: "use the pool's setting", distinct from None ("no timeout")."""


UNSET = _Unset()


class _Stale(Exception):
    """The connection died before any byte of the answer arrived (internal: the pool decides
    whether to send the request again or to raise `ConnectionFailed`)."""


class _PeerGone(Exception):
    """A send failed because the server closed or reset the connection."""


def _describe(timeout: float | None) -> str:
    return "ever" if timeout is None else f"{timeout:g} s"


class _Connection:
    """One socket and its h11 state machine, used by one request at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.h11 = h11.Connection(h11.CLIENT)
        # True once it has carried a whole exchange: the server may have closed it since.
        self.reused = False
        # Whether any byte of the current answer arrived (decides if a retry is safe).
        self.answered = False
        self._timeout: float | _Unset | None = UNSET

    def close(self) -> None:
        self.sock.close()

    def looks_closed(self) -> bool:
        """For an idle connection: has the server closed it (or sent something unasked)?"""
        # TLS may hold decrypted bytes the kernel no longer sees.
        pending = getattr(self.sock, "pending", None)
        if pending is not None and pending():
            return True
        try:
            # poll has no FD_SETSIZE limit; Windows lacks it and falls back to select.
            if hasattr(select, "poll"):
                poller = select.poll()
                poller.register(self.sock, select.POLLIN)
                return bool(poller.poll(0))
            readable, _, _ = select.select([self.sock], [], [], 0)
            return bool(readable)
        except (OSError, ValueError):
            return True

    def _settimeout(self, timeout: float | None) -> None:
        if timeout != self._timeout:
            self.sock.settimeout(timeout)
            self._timeout = timeout

    def _send(self, data: bytes, timeout: float | None) -> None:
        self._settimeout(timeout)
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise ConnectionFailed(
                f"the server accepted no data for {_describe(timeout)}"
            ) from None
        except OSError as exc:
            raise _PeerGone(str(exc)) from exc

    def send_request(
        self, request: h11.Request, body: bytes | Iterable[bytes] | None, timeout: float | None
    ) -> None:
        """Send the request. Should the server go away before taking all of it, stop
        quietly: it may have answered early (401, 413 before reading an upload), which
        reading the answer tells. Errors raised by `body` itself (a local file that cannot
        be read) propagate."""
        try:
            if body is None or isinstance(body, bytes):
                # One send for head and body: a small JSON request is one TCP segment.
                data = self.h11.send(request)
                if body:
                    data += self.h11.send(h11.Data(data=body))
                self._send(data + self.h11.send(h11.EndOfMessage()), timeout)
                return
            self._send(self.h11.send(request), timeout)
            for chunk in body:
                if chunk:
                    # Passthrough: a MiB piece goes out as it is, not copied into its frame.
                    for piece in self.h11.send_with_data_passthrough(h11.Data(data=chunk)) or ():
                        self._send(piece, timeout)
            self._send(self.h11.send(h11.EndOfMessage()), timeout)
        except _PeerGone:
            pass

    def next_event(self, timeout: float | None) -> h11.Event:
        """The next piece of the answer, reading from the socket as h11 needs."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                if not self.answered:  # EOF before any byte: h11 calls that an error too
                    raise _Stale("the server closed the connection without answering") from exc
                raise ConnectionFailed(
                    f"the server's answer is cut short or not valid HTTP/1.1 ({exc})"
                ) from exc
            if event is h11.NEED_DATA:
                self.h11.receive_data(self._recv(timeout))
                continue
            if event is h11.PAUSED:  # only after the answer ended, which callers stop at
                raise ConnectionFailed("the server sent more than one answer")
            assert isinstance(event, h11.Event)
            return event

    def _recv(self, timeout: float | None) -> bytes:
        self._settimeout(timeout)
        try:
            data = self.sock.recv(_CHUNK)
        except TimeoutError:
            raise ConnectionFailed(f"the server sent nothing for {_describe(timeout)}") from None
        except OSError as exc:
            if not self.answered:
                raise _Stale(str(exc)) from exc
            raise ConnectionFailed(f"lost the connection to the server ({exc})") from exc
        if data:
            self.answered = True
        return data

    def read_head(self, timeout: float | None) -> h11.Response:
        while True:
            event = self.next_event(timeout)
            if isinstance(event, h11.Response):
                return event
            if isinstance(event, h11.InformationalResponse):
                continue  # 100 Continue, 103 Early Hints: the real answer follows
            raise ConnectionFailed(f"unexpected {type(event).__name__} from the server")

    def reusable(self) -> bool:
        """After a whole exchange: can it carry the next one? Starts that next cycle."""
        c = self.h11
        if c.our_state is not h11.DONE or c.their_state is not h11.DONE:
            return False  # Connection: close, HTTP/1.0, or an upload cut short
        if c.trailing_data[0]:
            return False  # bytes past the end of the answer: the framing cannot be trusted
        c.start_next_cycle()
        self.reused, self.answered = True, False
        return True


class Response:
    """Status and headers of an answer; the body is read with `read` or `iter_bytes`.

    The connection goes back to the pool when the body has been read to its end; `close`
    (or leaving a `with` block) abandons an unread body and closes the connection."""

    def __init__(
        self,
        pool: ConnectionPool,
        conn: _Connection,
        head: h11.Response,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._read_timeout = read_timeout
        self._reading = False
        self.status = head.status_code
        self.reason = head.reason.decode("latin-1")
        headers: dict[str, str] = {}
        for name, value in head.headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            # Repeated fields combine into one, comma-separated (RFC 9110 §5.3).
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers = headers

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield the body as it arrives (at most 256 KiB at a time)."""
        conn = self._conn
        if conn is None:
            return  # read already, or closed
        if self._reading:
            raise RuntimeError("the body of this response is already being read")
        self._reading = True
        complete = False
        try:
            while True:
                event = conn.next_event(self._read_timeout)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    complete = True
                    return
                else:
                    raise ConnectionFailed(f"unexpected {type(event).__name__} in an answer")
        finally:
            # Also runs when the consumer stops early (GeneratorExit): the rest of the body
            # is then still on the wire and the connection cannot carry another request.
            # Unless `close` came first: then the connection is no longer ours to hand back.
            if self._conn is conn:
                self._conn = None
                if complete and conn.reusable():
                    self._pool._checkin(conn)
                else:
                    conn.close()

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    def close(self) -> None:
        """Abandon an unread body: the connection is closed, not reused."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def abort(self) -> None:
        """From another thread, while `iter_bytes` may be blocked in a read: make that read
        fail now; the reader's own cleanup then closes the connection."""
        conn = self._conn
        if conn is not None:
            try:  # noqa: SIM105 (contextlib is an import this hot module does without)
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConnectionPool:
    """Keep-alive connections to one server, checked out one per request; opened on demand,
    so `close` only drops the idle ones and the pool stays usable."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float | None = 30.0,
        read_timeout: float | None = 30.0,
        write_timeout: float | None = 30.0,
        max_idle: int = 8,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ConnectionFailed(f"unsupported server URL {base_url!r}: use http:// or https://")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        # As written in the URL: keeps an IPv6 address's brackets and omits a default port.
        self._host_header = parts.netloc.rpartition("@")[2] or self.host
        self.prefix = parts.path.rstrip("/")
        self.proxy = from_env(parts.scheme, self.host, self.port)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_idle = max_idle
        self._idle: list[_Connection] = []
        # threading.Lock is this very lock; importing threading would cost a few ms per run.
        self._lock = _thread.allocate_lock()
        self._ssl_context: ssl.SSLContext | None = None

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes | Iterable[bytes] | None = None,
        *,
        read_timeout: float | _Unset | None = UNSET,
    ) -> Response:
        """Send a request and return once the answer's head arrived. `body`: bytes (sent
        with a Content-Length) or an iterable of chunks (streamed, chunked encoding).
        `read_timeout`: longest silence from the server, None for none; default the pool's.
        """
        timeout = self.read_timeout if isinstance(read_timeout, _Unset) else read_timeout
        try:
            request = h11.Request(
                method=method,
                target=self.prefix + target,
                headers=self._headers(method, headers, body),
            )
        except (h11.LocalProtocolError, UnicodeError) as exc:  # a line break, a non-ASCII byte
            raise InvalidRequest(f"cannot send this request ({exc})") from exc
        replayable = method in _IDEMPOTENT and (body is None or isinstance(body, bytes))
        while True:
            conn = self._checkout()
            try:
                conn.send_request(request, body, self.write_timeout)
                head = conn.read_head(timeout)
            except _Stale as exc:
                conn.close()
                if conn.reused and replayable:
                    replayable = False  # once: a fresh connection failing is a real failure
                    continue
                if conn.reused:
                    raise ConnectionFailed(
                        f"the server closed a kept-alive connection before answering {method}; "
                        "not sent again, as it may have taken effect"
                    ) from exc
                raise ConnectionFailed(
                    f"the server closed the connection without answering ({exc})"
                ) from exc
            except BaseException:
                conn.close()
                raise
            return Response(self, conn, head, timeout)

    def _headers(
        self, method: str, headers: dict[str, str], body: bytes | Iterable[bytes] | None
    ) -> list[tuple[str, str]]:
        names = {name.lower() for name in headers}
        out = [] if "host" in names else [("Host", self._host_header)]
        out += headers.items()
        if "content-length" not in names and "transfer-encoding" not in names:
            if isinstance(body, bytes):
                out.append(("Content-Length", str(len(body))))
            elif body is not None:
                out.append(("Transfer-Encoding", "chunked"))
            elif method in _BODY_METHODS:
                out.append(("Content-Length", "0"))
        return out

    def _checkout(self) -> _Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None  # the most recently used
            if conn is None:
                return self._connect()
            if not conn.looks_closed():
                return conn
            conn.close()

    def _checkin(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self) -> _Connection:
        sock = self.open_socket()
        if self.tls:
            sock = self._wrap_tls(sock)
        return _Connection(sock)

    def open_socket(self) -> socket.socket:
        """A TCP connection to the server, or a tunnel to it through the proxy; TLS is the
        caller's (WebSocket sessions hand this socket to websockets)."""
        proxy = self.proxy
        if proxy is None:
            return _dial(self.host, self.port, self.connect_timeout, None)
        sock = _dial(proxy.host, proxy.port, self.connect_timeout, proxy)
        try:
            _tunnel(sock, proxy, authority(self.host, self.port), self.connect_timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        import ssl  # only for https: costs ~10 ms to import

        from ._tls import context

        try:
            if self._ssl_context is None:
                # Loading the CA store is the slow part of a handshake: once per pool.
                self._ssl_context = context()
            # The handshake runs under the connect timeout still set on the socket. The
            # name checked is the server's own, also inside a proxy's tunnel.
            return self._ssl_context.wrap_socket(sock, server_hostname=self.host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            via = f" through the proxy at {self.proxy.where}" if self.proxy else ""
            raise ConnectionFailed(
                f"TLS with the Paddock server at {self.host}:{self.port}{via} failed ({exc})"
            ) from exc


def _dial(host: str, port: int, timeout: float | None, proxy: Proxy | None) -> socket.socket:
    """A TCP connection to the server, or to the proxy when one is given."""
    if proxy is None:
        what, code = f"the Paddock server at {host}:{port}", None
    else:
        what, code = f"the proxy at {proxy.where}", PROXY_FAILED
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        raise ConnectionFailed(
            f"cannot reach {what} (no answer in {_describe(timeout)})", code=code
        ) from None
    except OSError as exc:
        raise ConnectionFailed(f"cannot reach {what} ({exc.strerror or exc})", code=code) from exc
    # Requests are written whole; Nagle would only delay the last segment.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tunnel(sock: socket.socket, proxy: Proxy, target: str, timeout: float | None) -> None:
    """Ask the proxy for a tunnel to `target` (CONNECT, RFC 9110 §9.3.6); on return the
    socket carries bytes to and from the server as if connected to it."""
    conn = h11.Connection(h11.CLIENT)
    headers = [("Host", target)]
    if proxy.authorization:
        headers.append(("Proxy-Authorization", proxy.authorization))
    head = conn.send(h11.Request(method="CONNECT", target=target, headers=headers))
    sock.settimeout(timeout)
    answer: h11.Response | None = None
    try:
        sock.sendall(head + conn.send(h11.EndOfMessage()))
        while answer is None:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(_CHUNK))
            elif isinstance(event, h11.Response):
                answer = event
            elif not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
    except TimeoutError:
        raise ConnectionFailed(
            f"the proxy at {proxy.where} did not answer a CONNECT to {target} "
            f"in {_describe(timeout)}",
            code=PROXY_FAILED,
        ) from None
    except (OSError, h11.RemoteProtocolError) as exc:
        raise ConnectionFailed(
            f"the proxy at {proxy.where} gave no usable answer to a CONNECT to {target} ({exc})",
            code=PROXY_FAILED,
        ) from exc
    if 200 <= answer.status_code < 300:
        if conn.trailing_data[0]:
            # The server speaks second on both protocols; bytes now would be the proxy's.
            raise ConnectionFailed(
                f"the proxy at {proxy.where} sent data ahead of the server's", code=PROXY_FAILED
            )
        return
    refusal = f"{answer.status_code} {answer.reason.decode('latin-1')}".strip()
    hint = ""
    if answer.status_code == 407:
        hint = (
            f"; it did not accept the user name and password in {proxy.variable}"
            if proxy.authorization
            else f"; give {proxy.variable} credentials: http://USER:PASSWORD@HOST:PORT"
        )
    raise ConnectionFailed(
        f"the proxy at {proxy.where} refused a tunnel to {target}: {refusal}{hint}",
        code=PROXY_FAILED,
    )
