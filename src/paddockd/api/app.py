"""`create_app(services)`: the FastAPI application, routes under /v1, OpenAPI at /openapi.json."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles

from .. import __version__
from . import errors
from .deps import Services, require_token
from .routes import (
    auth,
    boxes,
    desktop,
    drives,
    execs,
    files,
    images,
    network,
    runs,
    snapshots,
    system,
)

DESCRIPTION = """Paddock runs **boxes**: isolated Linux computers for coding agents.

Every endpoint but `/v1/health` needs `Authorization: Bearer <token>`. Errors are JSON:
`{"error": {"code": "...", "message": "...", "details": ...}}` with a stable `code`.
A box is addressed by its name, its id, or a unique id prefix."""


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
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.services = services
    errors.install(app)
    needs_token = [Depends(require_token)]
    app.include_router(system.public, prefix="/v1")
    modules = (system, boxes, network, execs, files, snapshots, drives, images, desktop, auth, runs)
    for module in modules:
        app.include_router(module.router, prefix="/v1", dependencies=needs_token)
    # WebSockets authenticate inside the handler, where an error can still be framed; the
    # desktop's page and bridge take a desktop link's token instead of the API token.
    app.include_router(execs.ws_router, prefix="/v1")
    app.include_router(desktop.ws_router, prefix="/v1")
    app.include_router(desktop.page_router)
    novnc = novnc_dir if novnc_dir and novnc_dir.is_dir() else Path("/usr/share/novnc")
    app.mount("/desktop/novnc", StaticFiles(directory=novnc, check_dir=False), name="novnc")
    return app
