"""The gateway's pieces that need no network: placeholders swapped in headers (in place,
whole headers, Basic credentials), values masked in a stream cut anywhere, and the server
name read from a ClientHello without answering it."""

from __future__ import annotations

import base64
import ssl

import pytest

from paddockd.domain.credentials import new_placeholder
from paddockd.domain.errors import InvalidRequest
from paddockd.domain.secrets import SecretRule, check_header, check_hosts, check_name
from paddockd.gateway.listeners import _MORE, server_name
from paddockd.gateway.relay import Masker
from paddockd.gateway.substitute import Swap, placeholders_in, substitute

P = new_placeholder("secret").encode()
OTHER = new_placeholder("secret").encode()


def test_a_placeholder_is_swapped_where_it_stands_and_nothing_else_changes() -> None:
    headers = [
        (b"Authorization", b"Bearer " + P),
        (b"X-Other", OTHER),
        (b"User-Agent", b"curl/8"),
    ]
    swapped = substitute(headers, {P: Swap(b"real-value")})
    assert swapped.headers == [
        (b"Authorization", b"Bearer real-value"),
        (b"X-Other", OTHER),  # not this request's to have: left as it is
        (b"User-Agent", b"curl/8"),
    ]
    assert swapped.used == {P} and swapped.unknown == {OTHER}


def test_basic_credentials_are_opened_swapped_and_sealed_again() -> None:
    basic = b"Basic " + base64.b64encode(b"x-access-token:" + P)
    assert placeholders_in([(b"Authorization", basic)]) == {P}
    [(_, value)] = substitute([(b"Authorization", basic)], {P: Swap(b"ghp_real")}).headers
    assert base64.b64decode(value.split(b" ")[1]) == b"x-access-token:ghp_real"
    # Not base64, or not Basic: left alone.
    odd = [(b"Authorization", b"Basic !!!"), (b"X", b"Basic")]
    assert substitute(odd, {P: Swap(b"v")}).headers == odd


def test_a_header_rule_sets_its_header_whole() -> None:
    swap = Swap(b"tok", b"authorization", b"token tok")
    got = substitute([(b"Authorization", b"Bearer " + P), (b"X-Copy", P)], {P: swap})
    # The rule's header is set whole; elsewhere the placeholder stays (the rule says where).
    assert got.headers == [(b"Authorization", b"token tok"), (b"X-Copy", P)]


@pytest.mark.parametrize("cut", range(1, 40))
def test_a_value_is_masked_wherever_the_stream_is_cut(cut: int) -> None:
    value = b"sk-real-0123456789abcdef"
    stream = b'data: {"echo": "' + value + b'"}\n\ndata: done\n\n'
    masker = Masker({value: b"*" * len(value)})
    out = masker.feed(stream[:cut]) + masker.feed(stream[cut:]) + masker.flush()
    assert out == stream.replace(value, b"*" * len(value))


def test_an_event_is_never_held_back_when_it_cannot_begin_a_value() -> None:
    masker = Masker({b"sk-real-0123": b"************"})
    assert masker.feed(b"data: one\n\n") == b"data: one\n\n"
    assert masker.feed(b"data: sk-") == b"data: "  # may be the value's start: held
    assert masker.feed(b"x\n\n") == b"sk-x\n\n"


def hello(name: str | None) -> bytes:
    ctx = ssl.create_default_context()
    out = ssl.MemoryBIO()
    tls = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname=name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return out.read()


def test_the_server_name_is_read_from_a_hello_and_nothing_else() -> None:
    assert server_name(hello("API.GitHub.com")) == "api.github.com"
    assert server_name(hello("api.github.com")[:60]) == _MORE
    assert server_name(b"GET / HTTP/1.1\r\nHost: api.github.com\r\n\r\n") is None
    assert server_name(b"\x16\x03\x01\x00\x05hello") in (None, _MORE)


def test_secret_rules_are_checked() -> None:
    assert check_name("GITHUB_TOKEN") == "GITHUB_TOKEN"
    for bad in ("github_token", "1TOKEN", "PATH", "ANTHROPIC_API_KEY", "PADDOCK_BOX", "A-B"):
        with pytest.raises(InvalidRequest):
            check_name(bad)
    assert check_hosts(["API.GitHub.com.", "*.npmjs.org"]) == ("api.github.com", "*.npmjs.org")
    for hosts in ([], ["https://github.com"], ["github.com:443"], ["10.0.0.1"], ["a b"]):
        with pytest.raises(InvalidRequest):
            check_hosts(hosts)
    assert check_header("Authorization", "token {value}") == ("Authorization", "token {value}")
    assert check_header(None, None) == (None, None)
    for header, fmt in (("Host", None), ("Bad Header", None), ("X", "no value"), (None, "{value}")):
        with pytest.raises(InvalidRequest):
            check_header(header, fmt)
    rule = SecretRule("T", ("api.github.com", "*.example.com"))
    assert rule.binds("API.github.com.") and rule.binds("a.example.com")
    assert not rule.binds("github.com") and not rule.binds("example.com")
