"""E2B's network rules and secret names (domain/header_rules.py): what is kept, what is
refused, and what a template becomes."""

from __future__ import annotations

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.header_rules import (
    HeaderRule,
    check_secret_name,
    dump_rules,
    parse_rules,
    render,
)


def _rule(headers: dict[str, object]) -> list[dict[str, object]]:
    return [{"transform": {"headers": headers}}]


def test_rules_merge_per_host_and_round_trip() -> None:
    raw = {
        "API.example.com": [
            {"transform": {"headers": {"Authorization": "Bearer ${e2b.secrets.tok}"}}},
            {"transform": {"headers": {"authorization": "Token ${e2b.secrets.tok}", "X-A": "b"}}},
            {},
        ],
        "*.example.org": _rule({"X-Key": "${e2b.secrets.k1}-${e2b.secrets.k2}"}),
    }
    rules = parse_rules(raw)
    assert rules[0] == HeaderRule(
        "api.example.com", (("authorization", "Token ${e2b.secrets.tok}"), ("X-A", "b"))
    )
    assert rules[1].secrets() == {"k1", "k2"}
    assert rules[1].pattern_for("a.example.org") == "*.example.org"
    assert rules[1].pattern_for("a.b.example.org") is None
    assert parse_rules(dump_rules(rules)) == rules
    assert parse_rules(None) == () and parse_rules({}) == ()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("api.example.com", "an object"),
        ({"10.0.0.1": _rule({"A": "b"})}, "host names only"),
        ({"10.0.0.0/8": _rule({"A": "b"})}, "host names only"),
        ({"https://x.com/": _rule({"A": "b"})}, "host name alone"),
        ({"x.com": {"transform": {}}}, "a list of rules"),
        ({"x.com": [{"match": "/v1"}]}, "transform.headers only"),
        ({"x.com": [{"transform": "x"}]}, "transform.headers only"),
        ({"x.com": _rule({"Bad Header": "v"})}, "invalid header name"),
        ({"x.com": _rule({"Host": "evil.com"})}, "cannot carry"),
        ({"x.com": _rule({"Content-Length": "0"})}, "cannot carry"),
        ({"x.com": _rule({"A": "line\r\nInjected: 1"})}, "printable ASCII"),
        ({"x.com": _rule({"A": 5})}, "printable ASCII"),
        ({"x.com": _rule({"A": "x" * 1025})}, "printable ASCII"),
        ({"x.com": _rule({"A": " Bearer x"})}, "no space at either end"),
        ({"x.com": _rule({"Upgrade": "h2c"})}, "cannot be set"),
        ({"x.com": _rule({"Proxy-Authorization": "x"})}, "cannot be set"),
        ({"x.com": _rule({"Expect": "100-continue"})}, "cannot be set"),
        ({"x.com": _rule({"A": "${e2b.identity.tokens.aws}"})}, "workload identity"),
        ({"x.com": _rule({"A": "${e2b.secrets.}"})}, "invalid secret name"),
        ({"x.com": _rule({f"H{i}": "v" for i in range(17)})}, "at most 16 headers"),
        ({f"h{i}.com": _rule({"A": "b"}) for i in range(17)}, "at most 16 hosts"),
    ],
)
def test_bad_rules_are_refused_by_name(raw: object, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        parse_rules(raw)


@pytest.mark.parametrize("name", ["", "-x", "a/b", "a b", "{x}", "x" * 129, "a\x00"])
def test_bad_secret_names(name: str) -> None:
    with pytest.raises(InvalidRequest):
        check_secret_name(name)


def test_render_needs_every_secret() -> None:
    template = "Bearer ${e2b.secrets.a}:${e2b.secrets.b}"
    assert render(template, {"a": "1", "b": "2"}) == "Bearer 1:2"
    assert render(template, {"a": "1"}) is None
    # A value that looks like a placeholder stays as it is (no second pass).
    assert render("${e2b.secrets.a}", {"a": "${e2b.secrets.b}", "b": "x"}) == "${e2b.secrets.b}"
