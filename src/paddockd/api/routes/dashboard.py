"""The web dashboard: its page at `/` (behind the login) and its built assets. The page is
a shell; everything it shows comes from the same /v1 API the SDKs use, with the web
session's cookie and its CSRF token (given to the page in a meta tag)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from ...domain.errors import NotFound
from ..deps import Svc, session_cookie

router = APIRouter(include_in_schema=False)
DASHBOARD = Path(__file__).parent.parent.parent / "dashboard"
ASSETS = DASHBOARD / "assets"


def csp(request: Request) -> str:
    """No inline script, nothing from elsewhere. Styles may be inline: xterm.js and noVNC
    size and place their elements with style attributes. WebSockets go to this host."""
    scheme = "wss" if request.url.scheme == "https" else "ws"
    host = request.headers.get("host", "")
    sockets = f" {scheme}://{host}" if host and all(c not in host for c in " ;,'") else ""
    return (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        f"img-src 'self' data: blob:; font-src 'self'; connect-src 'self'{sockets}; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


def _entries() -> dict[str, str]:
    """The entry files' hashed names, as the build wrote them (`{"app.js": ...}`)."""
    try:
        manifest: dict[str, str] = json.loads((ASSETS / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return manifest


@router.get("/")
async def dashboard(request: Request, svc: Svc) -> Response:
    session = await svc.accounts.session(session_cookie(request))
    if session is None:
        return RedirectResponse("/login?next=/", 303)
    entries = _entries()
    headers = {
        "Content-Security-Policy": csp(request),
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store",
        "Referrer-Policy": "same-origin",
        "X-Content-Type-Options": "nosniff",
    }
    if not {"app.js", "app.css"} <= entries.keys():
        text = (
            "<!doctype html><title>Paddock</title><p>The dashboard is not built: on the "
            "server, run <code>scripts/build-dashboard</code> (install.sh does).</p>"
        )
        return HTMLResponse(text, 503, headers)
    values = {
        "csrf": session.csrf,
        "user": session.user.username,
        "role": session.user.role.value,
        "css": entries["app.css"],
        "js": entries["app.js"],
    }
    page = (DASHBOARD / "index.html").read_text()
    for key, value in values.items():
        page = page.replace("{{" + key + "}}", html.escape(value))
    return HTMLResponse(page, headers=headers)


@router.get("/dashboard/assets/{name}")
async def asset(name: str, request: Request) -> Response:
    """A built file; its name carries its content's hash, so it is cached for good. The
    build wrote each one gzipped too: sent as is to a browser that takes gzip."""
    path = ASSETS / name
    if "/" in name or name.startswith(".") or not path.is_file() or name.endswith(".gz"):
        raise NotFound("no such dashboard file")
    headers = {"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding"}
    packed = path.with_name(name + ".gz")
    media = _MEDIA.get(path.suffix, "application/octet-stream")
    if "gzip" in request.headers.get("accept-encoding", "") and packed.is_file():
        headers["Content-Encoding"] = "gzip"
        return FileResponse(packed, media_type=media, headers=headers)
    return FileResponse(path, media_type=media, headers=headers)


_MEDIA = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
}
