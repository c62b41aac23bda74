"""What the dashboard's benchmark and its screenshots share: a paddockd of their own with
an owner, boxes, and (from the browser tests) Debian's chromium and a logged-in page."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.harness import Server
from tests.integration.test_accounts import create_owner
from tests.integration.test_dashboard import launch as chromium
from tests.integration.test_dashboard import logged_in

__all__ = ["chromium", "log_in", "make_boxes", "owned_server"]


def log_in(browser: Any, server: Server, width: int = 1280, height: int = 800) -> Any:
    """A new context's page, logged in as the owner, showing the box list."""
    return logged_in(browser, server, "ada", width, height)


@contextlib.contextmanager
def owned_server() -> Iterator[Server]:
    """A paddockd with an owner, ada; its boxes are removed at the end."""
    with tempfile.TemporaryDirectory(prefix="paddock-dash-") as tmp:
        server = Server(Path(tmp))
        try:
            create_owner(server)
            yield server
        finally:
            server.close()


def make_boxes(server: Server, prefix: str, n: int) -> list[str]:
    names = [f"{prefix}-{i:02d}" for i in range(n)]

    def make(name: str) -> None:
        with server.client() as c:
            c.create_box(name, ttl=3600)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(make, names))
    return names
