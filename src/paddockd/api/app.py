"""`create_app(services)`: the FastAPI application, routes under /v1, OpenAPI at /openapi.json."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from .. import __version__
from . import errors
from .audit_trail import AuditTrail
from .deps import Services, owner
from .e2b.gateway import E2BGateway
from .gate import BodyLimit, TokenGate
from .preview_proxy import PreviewProxy
from .routes import (
    audit,
    auth,
    boxes,
    clients,
    dashboard,
    desktop,
    devices,
    drives,
    events,
    execs,
    files,
    images,
    members,
    metrics,
    network,
    portable,
    previews,
    runs,
    secrets,
    settings,
    snapshots,
    ssh,
    stats,
    system,
    templates,
    terminals,
    web,
    webhooks,
)

DESCRIPTION = """Paddock runs **boxes**: isolated Linux computers for coding agents.

Every endpoint but `/v1/health` needs `Authorization: Bearer <token>`. Errors are JSON:
`{"error": {"code": "...", "message": "...", "details": ...}}` with a stable `code`.
A box is addressed by its name, its id, or a unique id prefix."""

# Every JSON body is small (the largest: an exec's command and environment, a run's
# instruction); this bounds what any caller makes paddockd hold. File uploads stream to
# the box in ~1 MiB pieces and have no cap here: what they can fill is the box's disk.
MAX_JSON_BODY = 1 << 20
API = "/v1"


OWNER_ONLY = "x-owner-only"


def _mark_owner_only(router: APIRouter) -> None:
    """Say in the OpenAPI spec which operations only the server's owner may call: those
    that depend on `deps.owner`, so the mark is what is enforced (a test calls each of
    them as a member, and checks no server-wide route goes without it)."""
    for route in router.routes:
        if isinstance(route, APIRoute) and _depends_on(route.dependant, owner):
            route.openapi_extra = {**(route.openapi_extra or {}), OWNER_ONLY: True}


def _depends_on(dependant: Dependant, call: Callable[..., object]) -> bool:
    return any(d.call is call or _depends_on(d, call) for d in dependant.dependencies)


def create_app(
    services: Services,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    novnc_dir: Path | None = None,
) -> FastAPI:
    app = FastAPI(
        title="Paddock API",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # No interactive docs page: FastAPI's loads swagger-ui from a CDN into paddockd's
        # own origin, where the session cookie lives. The spec is served and committed.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    errors.install(app)
    # Every other API route needs the API token, checked by TokenGate (below) before any
    # body is read: a route dependency would run only after FastAPI read the body.
    app.include_router(system.public, prefix=API, responses=errors.ERROR_RESPONSES)
    app.include_router(devices.public, prefix=API, responses=errors.ERROR_RESPONSES)
    app.include_router(previews.public, prefix=API)
    modules = (
        system,
        boxes,
        network,
        execs,
        files,
        snapshots,
        drives,
        images,
        desktop,
        auth,
        secrets,
        runs,
        stats,
        previews,
        portable,
        templates,
        ssh,
        audit,
        webhooks,
        settings,
    )
    for router in (members.router, members.admin, *(m.router for m in modules)):
        _mark_owner_only(router)
        app.include_router(router, prefix=API, responses=errors.ERROR_RESPONSES)
    # WebSockets authenticate inside the handler, where an error can still be framed; the
    # desktop's page and bridge take a desktop link's token instead of the API token.
    app.include_router(execs.ws_router, prefix=API)
    app.include_router(desktop.ws_router, prefix=API)
    app.include_router(desktop.page_router)
    # The dashboard: its live list (server-sent events), its terminals, its page.
    app.include_router(events.router, prefix=API, responses=errors.ERROR_RESPONSES)
    app.include_router(terminals.ws_router, prefix=API)
    app.include_router(dashboard.router)
    app.include_router(clients.router)
    app.include_router(metrics.router)
    # Accounts' pages (setup, login, account) check their own session and forms.
    app.include_router(web.router)
    novnc = novnc_dir if novnc_dir and novnc_dir.is_dir() else Path("/usr/share/novnc")
    app.mount("/desktop/novnc", StaticFiles(directory=novnc, check_dir=False), name="novnc")
    # The last added runs first: the token is checked before the body is even counted.
    # They read their bodies as streams.
    streamed = (files.push_files, files.copy_files, portable.import_box)
    uploads = [
        (method, API + route.path)
        for route in (*files.router.routes, *portable.router.routes)
        if isinstance(route, APIRoute) and route.endpoint in streamed
        for method in route.methods or ()
    ]
    app.add_middleware(BodyLimit, limit=MAX_JSON_BODY, streaming=uploads)
    public = [
        API + r.path
        for r in (*system.public.routes, *devices.public.routes, *previews.public.routes)
        if isinstance(r, APIRoute)
    ]
    app.add_middleware(TokenGate, prefix=API, public=public)
    # E2B's API under /e2b authenticates with its own headers and answers its own errors.
    app.add_middleware(E2BGateway, e2b=getattr(services, "e2b", None))
    # Sees who each call's gate found (above), before a preview's traffic is told apart.
    app.add_middleware(
        AuditTrail,
        audit=getattr(services, "audit", None),
        metrics=getattr(services, "metrics", None),
    )
    # Outermost: a preview's requests are the box's, never the API's (no token, no cap).
    app.add_middleware(PreviewProxy)
    return app
