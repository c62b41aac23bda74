"""A hostile client against a real paddockd's API: 300 MB request bodies, without a token
and with one. Before the fix, FastAPI read and parsed the body before the token was
checked (the review saw paddockd's memory go from 108 to 720 MB for one request); now the
answer is 401 unread, or 413 at the 1 MiB JSON cap, and paddockd's memory stays put."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ..conftest import Server

SIZE = 300 * 2**20
MIB = 2**20
# What one request may add to paddockd's peak memory: far below the body's size.
ALLOWED_GROWTH = 30 * MIB


def body(size: int) -> Iterator[bytes]:
    """A JSON document of `size` bytes, made as it is sent."""
    head, tail = b'{"name": "', b'"}'
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        chunk = min(MIB, left)
        yield b"a" * chunk
        left -= chunk
    yield tail


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def send(server: Server, declared: bool, token: str | None) -> tuple[httpx.Response, int]:
    """POST a 300 MB body; the answer, and how much paddockd's peak RSS grew meanwhile (in
    bytes). The peak, not the RSS after: a body buffered and freed again would not show."""
    assert server.proc is not None
    pid = server.proc.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak restarts from the RSS now
    before = peak_kib(pid)
    headers = {"Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(SIZE)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    resp = httpx.post(f"{server.url}/v1/boxes", content=body(SIZE), headers=headers, timeout=120)
    return resp, (peak_kib(pid) - before) * 1024


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_300_mb_body_without_a_token_is_refused_unread(server: Server, declared: bool) -> None:
    resp, grown = send(server, declared, token=None)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "unauthorized"
    assert grown < ALLOWED_GROWTH, f"paddockd's peak memory grew by {grown // MIB} MiB"
    assert httpx.get(f"{server.url}/v1/health").status_code == 200


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_300_mb_json_body_with_a_token_is_a_413(server: Server, declared: bool) -> None:
    resp, grown = send(server, declared, token=server.token)
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "payload_too_large"
    assert grown < ALLOWED_GROWTH, f"paddockd's peak memory grew by {grown // MIB} MiB"
    with server.client() as c:
        assert c.list_boxes() is not None
