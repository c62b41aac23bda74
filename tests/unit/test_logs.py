"""paddockd's log holds no secret: uvicorn's WebSocket lines carry a desktop link's token in
their query string, and the filter takes it out."""

from __future__ import annotations

import io
import logging

import pytest

from paddockd.logs import RedactSecrets, keep_secrets_out, redact

TOKEN = "eyJiIjoiYWJjIn0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"/v1/boxes/abc/desktop/ws?token={TOKEN}", "/v1/boxes/abc/desktop/ws?token="),
        (f"/desktop/abc?view=1&token={TOKEN}&x=1", "/desktop/abc?view=1&token="),
        (f"/x?access_token={TOKEN}", "/x?access_token="),
        (f"/x?api_key={TOKEN}", "/x?api_key="),
        (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer "),
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
