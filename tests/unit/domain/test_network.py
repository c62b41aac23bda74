"""Egress policy validation: every bad input is a clear error, never a silent change."""

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.network import NetworkPolicy, closed_entry, closed_ranges, policy


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
        ("allowlist", ["exa_mple.com"], "invalid allowlist entry"),
        ("allowlist", ["*.com"], "invalid allowlist entry"),
        ("allowlist", ["a.*.example.com"], "invalid allowlist entry"),
        ("allowlist", ["-bad.example.com"], "invalid allowlist entry"),
        ("allowlist", ["x" * 64 + ".example.com"], "invalid allowlist entry"),
        ("allowlist", [""], "empty"),
        ("allowlist", ["https://github.com/"], r"is a URL, not a host: .* \(github\.com\)"),
        ("allowlist", ["github.com:443"], r"without a port \(github\.com;"),
    ],
)
def test_bad_policies(mode: str, allow: list[str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        policy(mode, allow)


def test_domains_and_wildcards() -> None:
    p = policy("allowlist", ["Allowed.Test.", "*.wild.test", "198.18.0.0/15"])
    assert p.allow == ("allowed.test", "*.wild.test", "198.18.0.0/15")
    assert p.domains == ("allowed.test", "*.wild.test") and p.ranges == ("198.18.0.0/15",)
    assert p.allows_name("allowed.test") and p.allows_name("ALLOWED.test.")
    assert p.allows_name("a.wild.test") and p.allows_name("deep.a.wild.test")
    assert not p.allows_name("wild.test")  # a wildcard covers names below it only
    assert not p.allows_name("other.test") and not p.allows_name("notallowed.test")
    assert not p.allows_name("xwild.test")
    assert policy("allow-all").allows_name("anything.test")
    assert not policy("deny-all").allows_name("allowed.test")


CLOSED = closed_ranges(True, ["198.18.255.0/30"])


@pytest.mark.parametrize(
    ("allow", "opened", "refused"),
    [
        (["198.18.1.1/32", "8.8.8.0/24"], (), None),  # public, and not the host's
        (["10.77.77.2/32"], (), ("10.77.77.2/32", "10.0.0.0/8")),
        (["0.0.0.0/0"], (), ("0.0.0.0/0", "169.254.0.0/16")),
        (["198.18.255.2/32"], (), ("198.18.255.2/32", "198.18.255.0/30")),  # the host's
        (["10.99.0.1/32"], ("10.99.0.0/24",), None),  # opened by the owner
        (["10.99.0.0/16"], ("10.99.0.0/24",), ("10.99.0.0/16", "10.0.0.0/8")),  # more than opened
        (["169.254.169.254/32"], ("169.254.0.0/16",), ("169.254.169.254/32", "169.254.0.0/16")),
    ],
)
def test_allowlists_reach_only_the_public_internet_and_what_the_owner_opened(
    allow: list[str], opened: tuple[str, ...], refused: tuple[str, str] | None
) -> None:
    found = closed_entry(policy("allowlist", allow), CLOSED, opened)
    assert ((found[0], found[1].cidr) if found else None) == refused
