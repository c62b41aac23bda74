"""The committed OpenAPI document and the SDK's public names stay what we say they are."""

from __future__ import annotations

import json
from pathlib import Path

import paddock
from paddockd.api.app import create_app

SPEC = Path(__file__).resolve().parents[2] / "spec" / "openapi.json"


def test_committed_openapi_is_current() -> None:
    live = create_app(None).openapi()  # type: ignore[arg-type]
    committed = json.loads(SPEC.read_text())
    assert committed == json.loads(json.dumps(live)), (
        "spec/openapi.json is stale: run `paddockd openapi > spec/openapi.json`"
    )


def test_every_path_but_health_requires_a_token() -> None:
    spec = create_app(None).openapi()  # type: ignore[arg-type]
    for path in spec["paths"]:
        assert path.startswith("/v1/")
    # The desktop page (not in the schema) takes a desktop link's token instead.
    app = create_app(None)  # type: ignore[arg-type]
    public = {getattr(r, "path", "") for r in app.routes} - {f"/v1{p}" for p in spec["paths"]}
    assert {p for p in public if p and not p.startswith("/v1/")} <= {
        "/openapi.json",
        "/desktop/{box_id}",
        "/desktop/novnc",
    }


def test_public_names() -> None:
    for name in paddock.__all__:
        assert getattr(paddock, name) is not None, name
    assert {"Client", "AsyncClient", "PaddockError", "Box", "ExecResult"} <= set(paddock.__all__)


def test_the_server_raises_the_wire_contracts_errors() -> None:
    """paddockd's errors are the wire tree's (or its own subclasses of them): each answers
    with a status and code a client decodes back into the same branch of the tree."""
    from paddock.wire import errors as wire
    from paddockd.domain import errors as server

    for cls in vars(server).values():
        if isinstance(cls, type) and issubclass(cls, Exception):
            assert issubclass(cls, wire.PaddockError), cls
            back = type(wire.error_from_body(cls.status, {"error": {"code": cls.code}}))
            # A fault of the server's own (the base, 500) reaches clients as ServerError.
            assert issubclass(cls, back) or back is wire.ServerError, (cls, back)
