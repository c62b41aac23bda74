"""Which proxy a server's connections take, from the environment (paddock._proxy)."""

from __future__ import annotations

import base64

import pytest

from paddock._proxy import PROXY_FAILED, bypass, from_env, is_loopback, parse
from paddock.wire.errors import ConnectionFailed

HTTPS = {"HTTPS_PROXY": "http://proxy.corp:3128"}


def proxy_of(url_scheme: str, host: str, port: int, **env: str) -> str | None:
    found = from_env(url_scheme, host, port, env)
    return None if found is None else f"{found.host}:{found.port} {found.variable}"


def test_each_scheme_has_its_own_variable() -> None:
    env = {"HTTPS_PROXY": "http://s.corp:1", "HTTP_PROXY": "http://p.corp:2"}
    assert proxy_of("https", "paddock.example.com", 443, **env) == "s.corp:1 HTTPS_PROXY"
    assert proxy_of("http", "paddock.example.com", 80, **env) == "p.corp:2 HTTP_PROXY"
    assert proxy_of("https", "paddock.example.com", 443, HTTP_PROXY="http://p.corp:2") is None
    assert proxy_of("http", "paddock.example.com", 80, HTTPS_PROXY="http://s.corp:1") is None


def test_lowercase_comes_first_and_empty_is_unset() -> None:
    both = {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}
    assert proxy_of("https", "example.com", 443, **both) == "low:1 https_proxy"
    empty = {"https_proxy": " ", "HTTPS_PROXY": "http://up:2"}
    assert proxy_of("https", "example.com", 443, **empty) == "up:2 HTTPS_PROXY"
    assert proxy_of("https", "example.com", 443) is None


def test_no_proxy_lowercase_comes_first() -> None:
    env = {**HTTPS, "no_proxy": "other.com", "NO_PROXY": "example.com"}
    assert proxy_of("https", "example.com", 443, **env) is not None


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST.", "box.localhost", "127.0.0.1", "127.1.2.3", "::1",
     "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"],
)  # fmt: skip
def test_loopback_never_goes_through_a_proxy(host: str) -> None:
    assert is_loopback(host)
    assert proxy_of("https", host, 7423, **HTTPS, NO_PROXY="") is None
    assert proxy_of("http", host, 7423, HTTP_PROXY="http://proxy.corp:3128") is None


@pytest.mark.parametrize(
    "host", ["example.com", "localhost.example.com", "128.0.0.1", "::2", "10.0.0.1", "1.127.0.0"]
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        ("*", "anything.example", 443, True),
        ("a.com, *", "anything.example", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "paddock.example.com", 443, True),
        ("example.com", "badexample.com", 443, False),
        ("example.com", "example.com.evil", 443, False),
        (".example.com", "example.com", 443, True),
        (".example.com", "a.b.example.com", 443, True),
        ("*.example.com", "a.example.com", 443, True),
        ("EXAMPLE.com.", "Paddock.Example.COM.", 443, True),
        ("one.com two.com", "two.com", 443, True),
        (" one.com ,, two.com ", "two.com", 443, True),
        ("example.com:8443", "example.com", 8443, True),
        ("example.com:8443", "example.com", 443, False),
        ("10.1.2.3", "10.1.2.3", 443, True),
        ("10.1.2.3", "10.1.2.4", 443, False),
        ("2.3.4", "1.2.3.4", 443, False),  # an address is not a name's suffix
        ("10.0.0.0/8", "10.200.3.4", 443, True),
        ("10.0.0.0/8", "11.0.0.1", 443, False),
        ("10.0.0.0/8", "ten.example", 443, False),  # names are never resolved
        ("not/a/range", "10.0.0.1", 443, False),
        ("fd00::/8", "fd12::1", 443, True),
        ("fd12::1", "fd12:0::1", 443, True),
        ("[fd12::1]:8443", "fd12::1", 8443, True),
        ("[fd12::1]:8443", "fd12::1", 443, False),
        ("", "example.com", 443, False),
        ("other.com", "example.com", 443, False),
    ],
)
def test_no_proxy(no_proxy: str, host: str, port: int, direct: bool) -> None:
    assert bypass(host, port, no_proxy) is direct
    assert (proxy_of("https", host, port, **HTTPS, NO_PROXY=no_proxy) is None) is direct


def test_a_proxy_url_without_scheme_or_port() -> None:
    found = parse("proxy.corp", "HTTPS_PROXY")
    assert (found.host, found.port, found.authorization) == ("proxy.corp", 80, None)
    v6 = parse("http://[fd00::3]:3128/", "HTTPS_PROXY")
    assert (v6.host, v6.port, v6.where) == ("fd00::3", 3128, "[fd00::3]:3128 (HTTPS_PROXY)")


def test_credentials_become_basic_auth_and_stay_out_of_messages() -> None:
    found = parse("http://al%40corp:p%3Ass%20w@proxy.corp:3128", "HTTPS_PROXY")
    assert found.authorization == "Basic " + base64.b64encode(b"al@corp:p:ss w").decode()
    assert "p%3Ass" not in found.where and "p%3Ass" not in repr(found)
    assert (
        parse("http://user@proxy.corp", "X").authorization
        == "Basic " + base64.b64encode(b"user:").decode()
    )
    assert parse("http://proxy.corp", "X").authorization is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("socks5://me:secret@proxy.corp:1080", "socks5:// proxy (socks5://proxy.corp)"),
        ("https://me:secret@proxy.corp", "https:// proxy"),
        ("http://:3128", "not a proxy URL"),
        ("http://proxy.corp:99999", "not a proxy URL"),
        ("http://proxy.corp:port", "not a proxy URL"),
    ],
)
def test_a_proxy_paddock_cannot_use_is_a_clear_error(value: str, says: str) -> None:
    with pytest.raises(ConnectionFailed) as failed:
        from_env("https", "example.com", 443, {"HTTPS_PROXY": value})
    assert failed.value.code == PROXY_FAILED
    assert says in failed.value.message and "HTTPS_PROXY" in failed.value.message
    assert "secret" not in failed.value.message


def test_a_bypassed_or_loopback_server_ignores_a_bad_proxy_value() -> None:
    env = {"HTTPS_PROXY": "socks5://proxy.corp", "NO_PROXY": "example.com"}
    assert from_env("https", "example.com", 443, env) is None
    assert from_env("https", "127.0.0.1", 443, env) is None
