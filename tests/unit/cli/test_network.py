"""Allowlist edits compare targets as the server stores them (paddockd's parse_target)."""

from __future__ import annotations

import pytest

from paddock.cli.network import edited, normalized
from paddock.wire.errors import InvalidRequest
from paddockd.domain.network import parse_target


@pytest.mark.parametrize(
    "target", ["198.18.9.9", "198.18.0.0/16", "Example.COM.", "*.GitHub.com", " pypi.org "]
)
def test_normalized_as_the_server_stores_it(target: str) -> None:
    assert normalized(target) == parse_target(target)


def test_remove_takes_an_address_for_its_slash_32() -> None:
    assert edited("b", ["198.18.9.9/32", "example.com"], ["198.18.9.9"]) == ["example.com"]


def test_removing_what_is_not_there_names_it() -> None:
    with pytest.raises(InvalidRequest, match=r"not in the allowlist of box b: 10\.0\.0\.1/32"):
        edited("b", ["example.com"], ["10.0.0.1", "example.com"])
