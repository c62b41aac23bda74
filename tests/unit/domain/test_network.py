"""Egress policy validation: every bad input is a clear error, never a silent change."""

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.network import NetworkPolicy, policy


def test_modes_and_normalisation() -> None:
    assert policy("allow-all") == NetworkPolicy("allow-all", ())
    assert policy("allowlist", ["198.18.1.7", "198.18.0.0/15", "198.18.1.7"]).allow == (
        "198.18.1.7/32",
        "198.18.0.0/15",
    )
    p = policy("allowlist", ["10.0.0.0/8"])
    assert NetworkPolicy.from_json(p.to_json()) == p
    assert NetworkPolicy.from_json(None) == NetworkPolicy()


@pytest.mark.parametrize(
    ("mode", "allow", "message"),
    [
        ("open", [], "unknown network mode"),
        ("allowlist", [], "ask for deny-all"),
        ("deny-all", ["198.18.0.0/16"], "takes no targets"),
        ("allowlist", ["198.18.0.1/16"], "host bits"),
        ("allowlist", ["198.18.0.0/33"], "invalid IPv4 range"),
        ("allowlist", ["fd00::/8"], "IPv6"),
        ("allowlist", ["not a host!"], "invalid allowlist entry"),
        ("allowlist", ["example.com"], "DNS filter"),
        ("allowlist", [""], "empty"),
    ],
)
def test_bad_policies(mode: str, allow: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        policy(mode, allow)
