"""/clients: the clients that match this server, for laptops to install from it (built by
scripts/build-clients at install time): the Python package as a wheel, the TypeScript SDK
as an npm tarball. Public, as a package index is: they hold no secret, and a new laptop
has no token yet. Only files of the clients folder are served, chosen by their kind."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from ..deps import Svc

router = APIRouter(include_in_schema=False)
_KINDS = {"python": "*.whl", "typescript.tgz": "*.tgz"}
_MISSING = (
    "paddockd has no {what} to hand out: on the server, ./install.sh builds them "
    "(or scripts/build-clients {folder}).\n"
)


def _built(folder: Path, pattern: str) -> Path | None:
    found = sorted(p for p in folder.glob(pattern) if p.is_file() and not p.is_symlink())
    return found[-1] if found else None


def _package(svc: Svc, kind: str) -> Path | Response:
    folder = svc.config.clients_dir
    built = _built(folder, _KINDS[kind])
    if built is None:
        what = "Python client" if kind == "python" else "TypeScript SDK"
        return PlainTextResponse(_MISSING.format(what=what, folder=folder), 404)
    return built


def _file(built: Path) -> FileResponse:
    return FileResponse(built, media_type="application/octet-stream", filename=built.name)


@router.get("/clients/python")
async def python_client(svc: Svc) -> Response:
    # pip tells a wheel only by its file name (not by a redirect's or a header's), so the
    # command to give pip is the wheel's own URL; this one leads a browser or curl there.
    found = _package(svc, "python")
    return found if isinstance(found, Response) else RedirectResponse(_url(found), 307)


@router.get("/clients/typescript.tgz")
async def typescript_client(svc: Svc) -> Response:
    found = _package(svc, "typescript.tgz")
    return found if isinstance(found, Response) else _file(found)


@router.get("/clients/{name}")
async def client_file(name: str, svc: Svc) -> Response:
    for kind in _KINDS:
        found = _package(svc, kind)
        if not isinstance(found, Response) and name == found.name:
            return _file(found)
    return PlainTextResponse("no such client: /clients lists this server's\n", 404)


def _url(built: Path) -> str:
    return f"/clients/{built.name}"


@router.get("/clients")
async def clients_page(request: Request, svc: Svc) -> HTMLResponse:
    base = html.escape(str(request.base_url).rstrip("/"))
    folder = svc.config.clients_dir
    have = {kind: _built(folder, pattern) for kind, pattern in _KINDS.items()}
    lines = [
        (
            "python",
            f"pip install {base}/clients/{html.escape(have['python'].name)}"
            if have["python"]
            else "",
            "the CLI (paddock) and the Python SDK",
        ),
        (
            "typescript.tgz",
            f"npm install {base}/clients/typescript.tgz",
            "the TypeScript SDK (@paddock/sdk)",
        ),
    ]
    items = "".join(
        f"<li>{html.escape(what)}: <code>{cmd}</code>"
        + (
            f" <small>({html.escape(built.name)})</small>"
            if (built := have[kind])
            else " <small>(not built on this server)</small>"
        )
        + "</li>"
        for kind, cmd, what in lines
    )
    body = (
        "<!doctype html><html><head><meta charset=utf-8><title>Clients · Paddock</title>"
        "<meta name=viewport content='width=device-width'></head><body><h1>Paddock clients</h1>"
        f"<p>The clients of this server's version, to install where you work:</p><ul>{items}</ul>"
        f"<p>Then <code>paddock login {base}</code>.</p></body></html>"
    )
    return HTMLResponse(body, headers={"Content-Security-Policy": "default-src 'none'"})
