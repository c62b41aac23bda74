"""Preview URLs' addressing and secrets, and what the proxy lets through of cookies."""

from __future__ import annotations

import pytest

from paddockd.api.preview_proxy import _ours, _strip_cookie_header
from paddockd.domain.errors import InvalidRequest
from paddockd.domain.previews import Target, check_secret, secret, target_of, validate_ttl

BOX = "0123456789ab"


@pytest.mark.parametrize(
    ("host", "path", "base", "want"),
    [
        (f"8080-{BOX}.pd.test", "/x?y", "pd.test", Target(BOX, 8080, "/x?y", "")),
        (f"8080-{BOX}.pd.test:8443", "/", "pd.test", Target(BOX, 8080, "/", "")),
        (f"8080-{BOX}.PD.test", "/", "pd.test", Target(BOX, 8080, "/", "")),
        (
            "pd.test",
            f"/preview/{BOX}/3000/a/b",
            "pd.test",
            Target(BOX, 3000, "/a/b", f"/preview/{BOX}/3000"),
        ),
        (
            "127.0.0.1:7423",
            f"/preview/{BOX}/3000",
            None,
            Target(BOX, 3000, "/", f"/preview/{BOX}/3000"),
        ),
        # Not previews: paddockd's own pages and API, look-alikes, other hosts.
        ("pd.test", "/v1/boxes", "pd.test", None),
        (f"8080-{BOX}.evil.test", "/", "pd.test", None),
        (f"8080-{BOX}.pd.test.evil.test", "/", "pd.test", None),
        (f"x8080-{BOX}.pd.test", "/", "pd.test", None),
        (f"8080-{BOX}.pd.test", "/", None, None),
        ("pd.test", "/preview/not-an-id/3000/", "pd.test", None),
        ("pd.test", "/previewer/", "pd.test", None),
    ],
)
def test_a_request_is_for_a_preview_only_by_its_exact_name_or_path(
    host: str, path: str, base: str | None, want: Target | None
) -> None:
    assert target_of(host, path, base) == want


def test_secrets_are_per_preview_and_per_server() -> None:
    one, two = secret(b"k" * 32, "a1"), secret(b"k" * 32, "a2")
    assert len(one) >= 32 and one != two
    assert check_secret(b"k" * 32, "a1", one)
    assert not check_secret(b"k" * 32, "a2", one)
    assert not check_secret(b"x" * 32, "a1", one)
    assert not check_secret(b"k" * 32, "a1", "")


def test_preview_lifetimes() -> None:
    assert validate_ttl(None) is None and validate_ttl(0) is None
    assert validate_ttl(3600) == 3600
    for bad in (5, 31 * 86400):
        with pytest.raises(InvalidRequest):
            validate_ttl(bad)


def test_paddockds_cookies_never_reach_the_box() -> None:
    sent = b"a=1; paddock_session=s; __Host-paddock_session=t; paddock_preview_x=p; b=2"
    assert _strip_cookie_header(sent) == b"a=1; b=2"
    assert _ours("paddock_login_csrf") and _ours("__Host-anything") and not _ours("session")
