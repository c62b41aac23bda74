"""Egress log bookkeeping and the suggested allowlist."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from paddockd.netpolicy.base import Flow
from paddockd.services.egress import EgressEvent, EgressLog, suggest


def event(kind: str, name: str = "", address: str = "", port: int = 0) -> EgressEvent:
    return EgressEvent("t", kind, "allowed", name, address, port, "tcp")


def test_suggest_names_wildcards_and_bare_addresses() -> None:
    events = [
        event("dns", "registry.npmjs.org", "104.16.0.1"),
        event("connect", "registry.npmjs.org", "104.16.0.1", 443),
        *(event("dns", f"{x}.cdn.example.com", "1.2.3.4") for x in "abc"),
        event("connect", "", "1.2.3.4", 443),  # reached through a name
        event("connect", "", "198.18.2.1", 80),  # by address only
        event("connect", "", "169.254.169.254", 80),  # never allowable
        event("connect", "", "10.213.0.1", 22),  # the host: never allowable
    ]
    assert suggest(events, frozenset({"10.213.0.1"})) == [
        "registry.npmjs.org",
        "*.cdn.example.com",
        "198.18.2.1/32",
    ]
    assert suggest([]) == []


@pytest.mark.anyio
async def test_log_names_connections_and_survives_a_flush(tmp_path: Path) -> None:
    log = EgressLog(tmp_path, lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    (tmp_path / "b1").mkdir()
    history, live = await log.follow("b1")
    assert history == []
    log.dns("b1", "allowed.test", "allowed", ["198.18.1.1"])
    log.connections(
        [
            Flow("10.213.0.9", "198.18.1.1", "tcp", 80, "allowed", 2),
            Flow("10.213.0.50", "198.18.1.1", "tcp", 80, "allowed", 1),  # not ours
        ],
        {"10.213.0.9": "b1"}.get,
    )
    await log.flush()
    events = await log.read("b1")
    assert [(e.kind, e.name, e.address, e.count) for e in events] == [
        ("dns", "allowed.test", "198.18.1.1", 1),
        ("connect", "allowed.test", "198.18.1.1", 2),
    ]
    assert (await anext(live)).kind == "dns" and (await anext(live)).kind == "connect"
    assert len(await log.read("b1", limit=1)) == 1


@pytest.mark.anyio
async def test_a_log_line_cut_short_or_garbled_is_left_out(tmp_path: Path) -> None:
    log = EgressLog(tmp_path, lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    (tmp_path / "b1").mkdir()
    log.path("b1").write_bytes(
        b'{"time": "t", "kind": "dns", "verdict": "allowed", "name": "a.test"}\n'
        b'{"time": "t", "kind": "dns", "colour": "red"}\n'
        b"[1, 2]\n"
        b'{"time": "t", "kind": "conn\xff'
    )
    log.dns("b1", "b.test", "allowed", [])
    await log.flush()
    assert [e.name for e in await log.read("b1")] == ["a.test", "b.test"]
