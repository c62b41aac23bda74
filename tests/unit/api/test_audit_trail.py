"""What an audit entry says of a call, from the ASGI scope alone: the route with its
router's prefix, its names with secret ones masked, how the caller signed in (a token's
first characters only), and anonymous refusals kept within a budget."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from paddock.wire.keys import e2b_key
from paddockd.api.audit_trail import MASK, entry
from paddockd.api.deps import CALLER
from paddockd.domain.accounts import Role, User
from paddockd.domain.audit import AuditEntry
from paddockd.services.audit import ANONYMOUS_PER_MINUTE, AuditService

TOKEN = "pdk_Secret0123456789abcdefghijklmnopqrstuvw"


def scope(
    path: str, method: str = "POST", template: str | None = None, **extra: Any
) -> dict[str, Any]:
    headers = [(k.encode(), v.encode()) for k, v in extra.pop("headers", {}).items()]
    s: dict[str, Any] = {"type": "http", "method": method, "path": path, "headers": headers}
    s["client"] = ("192.0.2.7", 5555)
    if template is not None:
        s["route"] = SimpleNamespace(path=template)
        s["endpoint"] = object()
    s.update(extra)
    return s


def test_a_routed_call_names_its_route_target_and_token_prefix() -> None:
    bob = User("u1", "bob", Role.MEMBER)
    e = entry(
        scope(
            "/v1/boxes/web/exec",
            template="/boxes/{ref}/exec",
            path_params={"ref": "web"},
            headers={"authorization": f"Bearer {TOKEN}"},
            state={CALLER: bob},
        ),
        200,
        1.0,
    )
    assert (e.actor, e.user_id, e.action, e.target) == (
        "bob",
        "u1",
        "POST /v1/boxes/{ref}/exec",
        "ref=web",
    )
    assert e.credential == "token pdk_Secr…" and e.source == "192.0.2.7" and e.outcome == "ok"
    assert TOKEN[8:] not in repr(e)


def test_secret_names_and_long_unrouted_segments_are_masked() -> None:
    e = entry(
        scope("/setup/abcdef", template="/setup/{token}", path_params={"token": "abcdef"}), 401, 1.0
    )
    assert e.target == f"token={MASK}" and e.actor == "anonymous" and e.outcome == "refused"
    key = "k" * 40
    e = entry(scope(f"/e2b/template-files/{key}/{'f' * 64}", method="PUT"), 201, 1.0)
    assert e.action == f"PUT /e2b/template-files/{MASK}/{MASK}" and key not in repr(e)
    e = entry(
        scope(
            "/e2b/sandbox/files", headers={"x-api-key": e2b_key(TOKEN), "e2b-sandbox-id": "abc123"}
        ),
        200,
        1.0,
    )
    assert e.credential == "e2b key pdk_Secr…" and e.target == "sandbox=abc123"
    e = entry(scope("/e2b/sandbox/files", headers={"x-access-token": "pde_xyz"}), 200, 1.0)
    assert e.credential == "envd token"
    assert entry(scope("/files"), 200, 1.0).credential == "signed link"


class _Repo:
    def __init__(self) -> None:
        self.rows: list[AuditEntry] = []

    async def append(self, entries: list[AuditEntry]) -> None:
        self.rows.extend(entries)


@pytest.mark.anyio
async def test_anonymous_refusals_are_kept_within_a_budget_per_source() -> None:
    repo = _Repo()
    audit = AuditService(repo, 90, now=lambda: 600.0)  # type: ignore[arg-type]
    anonymous = AuditEntry(1.0, "anonymous", None, "none", "192.0.2.7", "POST /v1/boxes", "", 401)
    for _ in range(ANONYMOUS_PER_MINUTE * 3):
        audit.record(anonymous)
    audit.record(AuditEntry(1.0, "anonymous", None, "none", "192.0.2.8", "POST /login", "", 401))
    audit.record(AuditEntry(1.0, "bob", "u1", "session", "192.0.2.7", "POST /v1/boxes", "", 201))
    await audit.flush()
    assert len(repo.rows) == ANONYMOUS_PER_MINUTE + 2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
