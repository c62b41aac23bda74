"""Settings changed while a real server runs (`paddock settings`): new boxes follow them,
they outlast a restart, a refused value changes nothing, each change is in the audit log,
and a member can neither read nor change them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..harness import Server
from .test_members import bearer, create_owner, member_token


@pytest.fixture(scope="module")
def tuned(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    server = Server(workdir / "settings", upstream_dns=dns_stub.address)
    try:
        create_owner(server)
        yield server, member_token(server, "bob")
    finally:
        server.close()


def test_new_boxes_follow_a_changed_default_and_it_outlasts_a_restart(
    tuned: tuple[Server, str],
) -> None:
    server, _ = tuned
    server.cli("settings", "set", "boxes.default_ttl", "45m", check=True)
    server.cli("settings", "set", "network.default_mode", "deny-all", check=True)
    name = f"set-{uuid.uuid4().hex[:6]}"
    try:
        server.cli("new", "--name", name, check=True)
        with server.client() as c:
            box = c.get_box(name)
            assert box.ttl == 2700 and box.network.mode == "deny-all"
        server.kill()
        server.start()
        listed = server.cli("settings", "ls", "--json", check=True)
        assert '"key": "boxes.default_ttl"' in listed.stdout
        with server.client() as c:
            ttl = c.get_setting("boxes.default_ttl")
            assert (ttl.value, ttl.file_value, ttl.source) == (2700, 3600, "set")
        refused = server.cli("settings", "set", "boxes.default_ttl", "soon")
        assert refused.returncode == 1 and "not a duration" in refused.stderr
        assert "Traceback" not in refused.stderr
        with server.client() as c:
            assert c.get_setting("boxes.default_ttl").value == 2700
    finally:
        server.cli("rm", "-f", name)
        server.cli("settings", "reset", "boxes.default_ttl", check=True)
        server.cli("settings", "reset", "network.default_mode", check=True)
    with server.client() as c:
        assert c.get_setting("boxes.default_ttl").source == "default"
        entries = c.audit(limit=50)
    changes = [e for e in entries if e.action.endswith("/v1/settings/{name}")]
    assert {e.target for e in changes} >= {"name=boxes.default_ttl", "name=network.default_mode"}
    assert {e.action.split()[0] for e in changes} == {"PUT", "DELETE"}
    assert any(e.status == 400 for e in changes)  # the refused one, too


def test_a_member_can_neither_read_nor_change_the_settings(tuned: tuple[Server, str]) -> None:
    server, bob = tuned
    with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=30) as member:
        for method, path, body in [
            ("GET", "/v1/settings", None),
            ("PUT", "/v1/settings/boxes.default_ttl", {"value": 60}),
            ("DELETE", "/v1/settings/boxes.default_ttl", None),
        ]:
            answer = member.request(method, path, json=body)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
    with server.client() as c:
        assert c.get_setting("boxes.default_ttl").source == "default"
