"""An answer that is not Paddock's names the URL instead of showing a body or nothing."""

from __future__ import annotations

from paddock.wire.errors import AuthenticationFailed, ServerError, error_from_body


def test_a_404_without_paddocks_body_is_not_a_paddock_server() -> None:
    err = error_from_body(404, "", server="http://example.test", path="/v1/status")
    assert isinstance(err, ServerError)
    assert err.message == (
        "http://example.test does not look like a Paddock server (HTTP 404 for /v1/status)"
    )


def test_a_proxys_error_page_shows_its_start() -> None:
    err = error_from_body(502, "<html>\n  Bad   Gateway</html>", path="/v1/boxes")
    assert err.message == "server answered HTTP 502 for /v1/boxes: <html> Bad Gateway</html>"


def test_paddocks_own_errors_are_unchanged() -> None:
    body = {"error": {"code": "unauthorized", "message": "no", "details": None}}
    assert isinstance(error_from_body(401, body, path="/v1/boxes"), AuthenticationFailed)
