"""A small HTTP CONNECT proxy on loopback for tests: it records every request it gets,
can demand credentials or refuse outright, and tunnels only to loopback — the names it
is given (`hosts`) all resolve to 127.0.0.1 here, so nothing leaves the machine."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from dataclasses import dataclass, field


@dataclass
class Asked:
    method: str
    target: str
    headers: dict[str, str]


@dataclass
class ConnectProxy:
    # Names a tunnel may reach (each to 127.0.0.1); other targets are answered 502.
    hosts: set[str] = field(default_factory=set)
    # Set: a CONNECT without exactly this Proxy-Authorization is answered 407.
    require: str | None = None
    # Set: the whole answer to every request, as raw bytes (e.g. a 403).
    refuse_with: bytes | None = None
    asked: list[Asked] = field(default_factory=list)
    tunnelled: list[str] = field(default_factory=list)  # targets of opened tunnels

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def __enter__(self) -> ConnectProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed by the test
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        with conn, suppress(OSError):
            head = b""
            while b"\r\n\r\n" not in head:
                more = conn.recv(4096)
                if not more:
                    return
                head += more
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            with self._lock:
                self.asked.append(Asked(method, target, headers))
            answer = self._refusal(method, target, headers)
            if answer is not None:
                conn.sendall(answer)
                return
            port = target.rpartition(":")[2]
            upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
            with self._lock:
                self.tunnelled.append(target)
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._pump(conn, upstream)

    def _refusal(self, method: str, target: str, headers: dict[str, str]) -> bytes | None:
        if self.refuse_with is not None:
            return self.refuse_with
        if method != "CONNECT":
            return _answer(405, "Method Not Allowed")
        if self.require is not None and headers.get("proxy-authorization") != self.require:
            return _answer(407, "Proxy Authentication Required", "Proxy-Authenticate: Basic\r\n")
        host = target.rpartition(":")[0].strip("[]")
        if host not in self.hosts:
            return _answer(502, "Bad Gateway")
        return None

    @staticmethod
    def _pump(client: socket.socket, upstream: socket.socket) -> None:
        def copy(src: socket.socket, dst: socket.socket) -> None:
            with suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        client.settimeout(None)
        upstream.settimeout(None)
        back = threading.Thread(target=copy, args=(upstream, client), daemon=True)
        back.start()
        with upstream:
            copy(client, upstream)
            back.join(30)


def _answer(status: int, reason: str, extra: str = "") -> bytes:
    return f"HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: 0\r\n\r\n".encode()
