"""A small blocking HTTP/1.1 client over a plain socket, used by the sync `Client`.

Why not httpx here: importing httpx costs ~200 ms on a small VPS, which would double the
cost of `paddock exec BOX -- true` (the Docker CLI does the same in ~80 ms). This module
needs only `socket` (and `ssl` for https), keeps one connection alive, streams request
bodies with chunked encoding and reads Content-Length, chunked and close-delimited bodies.
The async client uses httpx, where import time does not matter.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from ._exceptions import ConnectionFailed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

_CHUNK = 256 * 1024


class Response:
    def __init__(self, conn: Connection, status: int, reason: str, headers: dict[str, str]) -> None:
        self._conn = conn
        self.status = status
        self.reason = reason
        self.headers = headers
        self._done = False
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._remaining: int | None = int(cl) if cl is not None and not self._chunked else None
        self._keep_alive = headers.get("connection", "").lower() != "close" and (
            self._chunked or self._remaining is not None
        )

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield the body as it arrives; the connection is reusable once this is exhausted."""
        if self._done:
            return
        try:
            if self._chunked:
                yield from self._iter_chunked()
            elif self._remaining is not None:
                while self._remaining > 0:
                    data = self._conn.recv(min(self._remaining, _CHUNK))
                    if not data:
                        raise ConnectionFailed("connection closed in the middle of a response")
                    self._remaining -= len(data)
                    yield data
            else:
                while data := self._conn.recv(_CHUNK):
                    yield data
        except BaseException:
            self._conn.close()
            raise
        finally:
            self._done = True
        if not self._keep_alive:
            self._conn.close()

    def _iter_chunked(self) -> Iterator[bytes]:
        while True:
            line = self._conn.readline()
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self._conn.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            left = size
            while left:
                data = self._conn.recv(min(left, _CHUNK))
                if not data:
                    raise ConnectionFailed("connection closed in the middle of a response")
                left -= len(data)
                yield data
            self._conn.readline()

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    def close(self) -> None:
        """Abandon an unread body: the connection cannot be reused."""
        if not self._done:
            self._done = True
            self._conn.close()


class Connection:
    """One keep-alive connection to the server; reopened on demand."""

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ConnectionFailed(f"unsupported server URL {base_url!r}: use http:// or https://")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def _open(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise ConnectionFailed(
                f"cannot reach the Paddock server at {self.host}:{self.port} "
                f"({exc.strerror or exc})"
            ) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        sock.settimeout(None)
        return sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._buf = b""

    def recv(self, n: int) -> bytes:
        if self._buf:
            data, self._buf = self._buf[:n], self._buf[n:]
            return data
        assert self._sock is not None
        return self._sock.recv(n)

    def readline(self) -> bytes:
        assert self._sock is not None
        while b"\n" not in self._buf:
            data = self._sock.recv(65536)
            if not data:
                line, self._buf = self._buf, b""
                return line
            self._buf += data
        i = self._buf.index(b"\n") + 1
        line, self._buf = self._buf[:i], self._buf[i:]
        return line

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes | Iterable[bytes] | None = None,
    ) -> Response:
        # A server may close an idle keep-alive connection; retry once on a fresh one when
        # nothing of a streamed body has been consumed yet.
        reused = self._sock is not None
        try:
            return self._send(method, path, headers, body)
        except (ConnectionFailed, OSError):
            self.close()
            if not reused or not (body is None or isinstance(body, bytes)):
                raise
            return self._send(method, path, headers, body)

    def _send(
        self, method: str, path: str, headers: dict[str, str], body: bytes | Iterable[bytes] | None
    ) -> Response:
        if self._sock is None:
            self._sock = self._open()
        sock = self._sock
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is None:
            if method in ("POST", "PUT", "PATCH"):
                lines.append("Content-Length: 0")
        elif isinstance(body, bytes):
            lines.append(f"Content-Length: {len(body)}")
        else:
            lines.append("Transfer-Encoding: chunked")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if isinstance(body, bytes):
                sock.sendall(head + body)
            else:
                sock.sendall(head)
                if body is not None:
                    for chunk in body:
                        if chunk:
                            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sock.sendall(b"0\r\n\r\n")
            status_line = self.readline()
            if not status_line:
                raise ConnectionFailed("the server closed the connection without answering")
            _, status, *reason = status_line.decode("latin-1").split(" ", 2)
            resp_headers: dict[str, str] = {}
            while (line := self.readline()) not in (b"\r\n", b"\n", b""):
                key, _, value = line.decode("latin-1").partition(":")
                resp_headers[key.strip().lower()] = value.strip()
        except BaseException:
            self.close()
            raise
        return Response(self, int(status), (reason or [""])[0].strip(), resp_headers)
