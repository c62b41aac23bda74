"""paddockd's log holds no secret: uvicorn's WebSocket lines carry a desktop link's token in
their query string, and the filter takes it out."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from paddockd import logs
from paddockd.api.app import create_app
from paddockd.logs import RecentLog, RedactSecrets, keep_secrets_out, redact

from .conftest import World

TOKEN = "eyJiIjoiYWJjIn0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"/v1/boxes/abc/desktop/ws?token={TOKEN}", "/v1/boxes/abc/desktop/ws?token="),
        (f"/desktop/abc?view=1&token={TOKEN}&x=1", "/desktop/abc?view=1&token="),
        (f"/x?access_token={TOKEN}", "/x?access_token="),
        (f"/x?api_key={TOKEN}", "/x?api_key="),
        (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer "),
        (f"/preview/abc/8080/?paddock_preview={TOKEN}", "/preview/abc/8080/?paddock_preview="),
        (f"Cookie: paddock_preview_abc={TOKEN}", "Cookie: paddock_preview_abc="),
    ],
)
def test_secrets_in_urls_and_headers_are_redacted(text: str, kept: str) -> None:
    clean = redact(text)
    assert TOKEN not in clean and clean.startswith(kept + "[redacted]")


def test_plain_messages_are_untouched() -> None:
    text = '127.0.0.1:5 - "WebSocket /v1/boxes/abc/exec/ws" [accepted]'
    assert redact(text) == text


def test_uvicorns_websocket_line_reaches_the_log_redacted() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("uvicorn")
    logger.addHandler(handler)
    try:
        keep_secrets_out()
        assert any(isinstance(f, RedactSecrets) for f in handler.filters)
        # Exactly how uvicorn logs it (protocols/websockets/*_impl.py, asgi_send).
        logging.getLogger("uvicorn.error").warning(
            '%s - "WebSocket %s" [accepted]', "127.0.0.1:5", f"/v1/boxes/b/desktop/ws?token={TOKEN}"
        )
    finally:
        logger.removeHandler(handler)
    assert "/v1/boxes/b/desktop/ws?token=[redacted]" in out.getvalue()
    assert TOKEN not in out.getvalue()


def test_the_log_file_is_rotated_past_its_size(tmp_path: Path) -> None:
    """paddockd's output appended to a file by its supervisor once grew without end."""
    log = tmp_path / "paddockd.log"
    script = (
        "import os, sys; from paddockd.logs import rotate_if_large\n"
        "os.write(2, b'x' * 2000)\n"
        "for _ in range(6):\n"
        "    assert rotate_if_large(1000, keep=3)\n"
        "    os.write(2, b'y' * 2000)\n"
        "assert not rotate_if_large(10_000, keep=3)\n"
        "os.write(2, b'after')\n"
    )
    with log.open("ab") as out:
        subprocess.run([sys.executable, "-c", script], stderr=out, check=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["paddockd.log", "paddockd.log.1", "paddockd.log.2", "paddockd.log.3"]
    assert log.read_bytes().endswith(b"after") and log.stat().st_size < 3000


def test_recent_messages_are_kept_masked_and_bounded() -> None:
    recent = RecentLog(keep=3)
    logger = logging.getLogger("paddockd.test-recent")
    logger.addHandler(recent)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        for n in range(5):
            logger.info("message %d", n)
        logger.info("GET /desktop/abc?token=%s", TOKEN)
        assert [line.message for line in recent.lines(10)][:2] == ["message 3", "message 4"]
        assert TOKEN not in recent.lines(1)[0].message
        assert "[redacted]" in recent.lines(1)[0].message
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logger.exception("it failed")
        last = recent.lines(1)[0]
        assert last.level == "ERROR" and last.message == "it failed (RuntimeError: boom)"
        assert last.logger == "paddockd.test-recent"
        assert recent.lines(0) == [] and len(recent.lines(100)) == 3
    finally:
        logger.removeHandler(recent)


def test_the_server_log_is_the_owners(world: World) -> None:
    logs.remember()
    logger = logging.getLogger("paddockd.test-route")
    logger.setLevel(logging.INFO)
    logger.info("hello from the log")
    with TestClient(create_app(world.services)) as client:
        owner = {"authorization": f"Bearer {world.token}"}
        r = client.get("/v1/log", params={"lines": 2000}, headers=owner)
        assert r.status_code == 200
        assert "hello from the log" in [line["message"] for line in r.json()["lines"]]
        assert client.get("/v1/log", params={"lines": 0}, headers=owner).status_code == 422
        assert client.get("/v1/log").status_code == 401
    for name in ("", "uvicorn.error"):
        logging.getLogger(name).removeHandler(logs.recent)
