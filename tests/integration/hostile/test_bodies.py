"""Bodies are read only after auth, on every surface, and nothing inflates past its bounds:
every route of paddockd (the API, the dashboard and account pages, the device and setup
pages, the E2B control plane and envd, previews) is sent, with no credentials, a body far
larger than any cap and a small gzip that inflates to hundreds of MB. paddockd's memory
and the host's disk stay flat, and no route takes the large body in.

Before the fix the E2B gateway read bodies before it authenticated: a 200 MiB POST to
/e2b/sandboxes without a key grew paddockd from 143 to 516 MiB before its 401, and a
299 KiB gzip to /e2b/sandbox/files became a 228 MB spool file on the host's root disk."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.routing import APIRoute

from paddockd.api.app import create_app
from paddockd.api.e2b import control, files
from paddockd.api.e2b.filesystem import FilesystemService
from paddockd.api.e2b.gateway import _methods
from paddockd.api.e2b.process import ProcessService

from ..conftest import Server

pytestmark = pytest.mark.timeout(900)
MIB = 1 << 20
LARGE = 256 * MIB
# What a peer may push into loopback's socket buffers while the server reads nothing.
UNREAD = 48 * MIB
BOMB = gzip.compress(bytes(400 * MIB), compresslevel=9)
_PARAM = re.compile(r"\{[^}]+\}")


def _walk(routes: Iterable[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        if isinstance(route, APIRoute):
            for method in route.methods or ():
                if method != "HEAD":
                    yield method, prefix + route.path
        elif hasattr(route, "original_router"):  # FastAPI's included routers, as it keeps them
            yield from _walk(route.original_router.routes, prefix + route.include_context.prefix)


def _routes() -> Iterator[tuple[str, str]]:
    yield from _walk(create_app(SimpleNamespace()).routes)  # type: ignore[arg-type]
    yield from _walk(control.router.routes, "/e2b")
    yield from _walk(files.router.routes, "/e2b")
    for service, cls in (
        ("process.Process", ProcessService),
        ("filesystem.Filesystem", FilesystemService),
    ):
        for method in sorted(_methods(cls)):
            yield "POST", f"/e2b/sandbox/{service}/{method}"
    yield "POST", "/desktop/novnc/x"
    yield "POST", "/preview/0123456789ab/8080/upload"


ROUTES = sorted({(m, _PARAM.sub("x", p)) for m, p in _routes()})


def send(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None) -> int:
    """Send a request whose body is `body`, or LARGE zero bytes (stopping once the server
    stops taking them); the bytes of body that went out."""
    length = len(body) if body is not None else LARGE
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Content-Length": length}.items())
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head.encode() + b"\r\n")
        s.settimeout(0.5)
        piece = body if body is not None else bytes(MIB)
        try:
            while sent < length:
                s.sendall(piece)
                sent += len(piece)
        except OSError:  # a timeout: nobody reads; or the server closed the connection
            pass
        s.settimeout(5)
        with contextlib.suppress(OSError):
            s.recv(4096)
    return sent


def peak_rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM:"))) // 1024


def free_mib(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // MIB


def test_no_route_reads_or_inflates_a_body_before_it_knows_who_asks(server: Server) -> None:
    assert len(ROUTES) > 100  # the walk found the app's routes, E2B's and envd's
    assert server.proc is not None
    pid = server.proc.pid
    before_rss = peak_rss_mib(pid)
    before_disk = {p: free_mib(p) for p in ("/", "/tmp", str(server.dir))}
    took: dict[str, int] = {}
    for method, path in ROUTES:
        for kind, headers, body in (
            ("large", {"Content-Type": "application/json"}, None),
            (
                "gzip",
                {"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"},
                BOMB,
            ),
            (
                "multipart",
                {"Content-Type": "multipart/form-data; boundary=b", "Content-Encoding": "gzip"},
                BOMB,
            ),
        ):
            if kind == "multipart" and not path.startswith("/e2b"):
                continue
            sent = send(server.port, method, path, headers, body)
            if kind == "large":
                took[f"{method} {path}"] = sent
    grown = peak_rss_mib(pid) - before_rss
    assert grown < 64, f"paddockd's peak memory grew by {grown} MiB"
    for where, free in before_disk.items():
        assert free - free_mib(where) < 64, f"{where} lost {free - free_mib(where)} MiB"
    read = {route: n // MIB for route, n in took.items() if n > UNREAD}
    assert read == {}, f"routes that took the large body in (MiB): {read}"
