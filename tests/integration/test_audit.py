"""The audit log on a real server: the owner's and a member's calls under their names
(and which token: its first characters), refused logins and anonymous 401s, what each
may read of it, and never a secret in it."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from paddock import AuditEvent, Client

from ..harness import Server
from .test_accounts import PASSWORD, log_in, web
from .test_members import bearer, owner_and_bob

SECRET_VALUE = "ghp_audit0123456789abcdefsecret"
FORGED = "pdk_forged0123456789abcdefghijklmnopqrstuv"


@pytest.fixture(scope="module")
def audited(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    with owner_and_bob(workdir / "audit", dns_stub) as both:
        yield both


def _find(events: list[AuditEvent], **wanted: object) -> AuditEvent:
    for e in events:
        if all(getattr(e, k) == v for k, v in wanted.items()):
            return e
    raise AssertionError(f"no {wanted} in {[(e.actor, e.action, e.status) for e in events]}")


def test_who_did_what_is_recorded_and_no_secret(audited: tuple[Server, str]) -> None:
    server, bob = audited
    with server.client() as owner:
        owner.set_secret("AUDIT_TOKEN", ["api.github.com"], SECRET_VALUE)
    with Client(server.url, bob) as member:
        member.create_box("bobs-box", ttl=600)
        member.exec("bobs-box", "true")
        member.delete_box("bobs-box", force=True)
    with web(server) as browser:
        assert log_in(server, browser, "bob", password="not-" + PASSWORD).status_code == 401
    assert httpx.post(server.url + "/v1/boxes", headers=bearer(FORGED), json={}).status_code == 401

    with server.client() as owner:
        events = owner.audit(limit=500)
    made = _find(events, actor="bob", action="POST /v1/boxes", status=201)
    assert made.credential == f"token {bob[:8]}…" and made.source == "127.0.0.1"
    _find(events, actor="bob", action="POST /v1/boxes/{ref}/exec", target="ref=bobs-box")
    _find(events, actor="bob", action="DELETE /v1/boxes/{ref}", target="ref=bobs-box")
    _find(events, action="PUT /v1/secrets/{name}", target="name=AUDIT_TOKEN", outcome="ok")
    login = _find(events, actor="anonymous", action="POST /login", status=401)
    assert login.outcome == "refused"
    forged = _find(events, actor="anonymous", action="POST /v1/boxes", status=401)
    assert forged.credential == f"token {FORGED[:8]}…"
    # The owner reads one user's; a member only their own, whatever they ask.
    with server.client() as owner:
        assert {e.actor for e in owner.audit(user="bob")} == {"bob"}
        assert {e.actor for e in owner.audit(box="bobs-box")} == {"bob"}
    with Client(server.url, bob) as member:
        mine = member.audit(user="anonymous", limit=500)
    assert mine and {e.actor for e in mine} == {"bob"}
    # No secret anywhere in the log: not the secret's value, a token, a password.
    with sqlite3.connect(server.dir / "data" / "paddock.db") as db:
        rows = json.dumps(db.execute("SELECT * FROM audit_log").fetchall())
    for secret in (SECRET_VALUE, bob, server.token, FORGED, PASSWORD):
        assert secret not in rows and secret[8:] not in rows


def test_anonymous_refusals_cannot_flood_the_log(audited: tuple[Server, str]) -> None:
    server, _ = audited
    with httpx.Client(base_url=server.url, timeout=30) as anyone:
        for _ in range(100):
            anyone.post("/v1/boxes", json={})
    time.sleep(1.5)
    with sqlite3.connect(server.dir / "data" / "paddock.db") as db:
        recent = db.execute(
            "SELECT count(*) FROM audit_log WHERE actor = 'anonymous' AND at > ?",
            (time.time() - 60,),
        ).fetchone()[0]
    # A budget a source and minute (services/audit.py), plus this file's first test's.
    assert 30 <= recent <= 32 + 30, recent


def test_the_server_log_is_the_owners(audited: tuple[Server, str]) -> None:
    """`paddock logs --server`: paddockd's own messages for the owner, wherever its log
    goes; a member is refused; no token in them."""
    server, bob = audited
    done = server.cli("logs", "--server", "-n", "2000", check=True)
    assert "listening on" in done.stdout, done.stdout[-2000:]
    lines = json.loads(server.cli("logs", "--server", "--json", check=True).stdout)
    assert lines and {"at", "level", "logger", "message"} <= set(lines[-1])
    text = done.stdout
    for secret in (server.token, bob):
        assert secret not in text
    with Client(server.url, bob) as member, pytest.raises(Exception, match="owner"):
        member.server_log()
