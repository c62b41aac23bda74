"""Forgetting an address's tracked connections, with a stand-in for the conntrack tool."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from paddockd.netpolicy.conntrack import Conntrack


def test_both_directions_are_forgotten_and_no_match_is_fine(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    tool = tmp_path / "conntrack"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')  # 1: nothing matched
    tool.chmod(0o755)
    Conntrack(str(tool)).forget("10.213.0.7")
    # Both at once (netpolicy/conntrack.py), so in either order.
    assert sorted(calls.read_text().splitlines()) == [
        "-D --orig-dst 10.213.0.7",
        "-D --orig-src 10.213.0.7",
    ]


def test_a_missing_tool_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conntrack = Conntrack(str(tmp_path / "absent"))
    with caplog.at_level(logging.WARNING):
        conntrack.forget("10.213.0.7")
        conntrack.forget("10.213.0.8")
    assert len([r for r in caplog.records if "not installed" in r.message]) == 1
