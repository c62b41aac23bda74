"""The web pages of accounts: the owner's one-time setup, members' invitations, login,
logout and the account page (change password). Plain HTML forms, no script: the
dashboard comes on top of the session these pages start.

Forms carry a CSRF token: the session's own once logged in; before that (setup, login)
a random value in a cookie and the form alike, so another site cannot log a browser into
an account of its choosing."""

from __future__ import annotations

import html
import secrets
import time
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...domain.accounts import MIN_PASSWORD
from ...domain.errors import PaddockError, TooManyAttempts
from ...services.accounts import SESSION_MAX, Session
from ..deps import SESSION_COOKIE, Svc, cookie_name, is_secure, session_cookie

router = APIRouter(include_in_schema=False)

LOGIN_CSRF_COOKIE = "paddock_login_csrf"
MAX_FORM = 16 * 1024

_STYLE = (
    "body{font:16px system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}"
    "label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.4rem;font:inherit}"
    "button{margin-top:1rem;padding:.5rem 1rem;font:inherit}.err{color:#a00}.ok{color:#070}"
)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    page = (
        f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)} · Paddock"
        f"</title><meta name=viewport content='width=device-width'><style>{_STYLE}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    # Pages with forms are never framed (clickjacking) nor cached.
    headers = {
        "X-Frame-Options": "DENY",
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
        "form-action 'self'; frame-ancestors 'none'",
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",  # the setup link is in the URL
    }
    return HTMLResponse(page, status, headers)


def _message(text: str, kind: str = "err") -> str:
    return f"<p class={kind}>{html.escape(text)}</p>" if text else ""


def _field(name: str, label: str, kind: str = "text", value: str = "") -> str:
    auto = {"username": "username", "password": "current-password"}.get(name, "new-password")
    return (
        f"<label for={name}>{label}</label><input id={name} name={name} type={kind} "
        f"value='{html.escape(value)}' autocomplete={auto} required>"
    )


def _hidden(csrf: str) -> str:
    return f"<input type=hidden name=csrf value='{html.escape(csrf)}'>"


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    parsed = parse_qs(body.decode(errors="replace"), keep_blank_values=True)
    return {key: values[0] for key, values in parsed.items()}


def _secure(request: Request) -> bool:
    return is_secure(request)


def _name(request: Request, base: str) -> str:
    return cookie_name(base, _secure(request))


def _with_login_csrf(request: Request, page: HTMLResponse, token: str) -> HTMLResponse:
    page.set_cookie(
        _name(request, LOGIN_CSRF_COOKIE),
        token,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return page


def _login_csrf_ok(request: Request, form: dict[str, str]) -> bool:
    cookie = request.cookies.get(_name(request, LOGIN_CSRF_COOKIE), "")
    return bool(cookie) and secrets.compare_digest(cookie, form.get("csrf", ""))


async def _session(request: Request, svc: Svc) -> Session | None:
    return await svc.accounts.session(session_cookie(request))


async def _signed_form(request: Request, svc: Svc) -> tuple[Session | None, dict[str, str] | None]:
    """The session and its posted form when the form carries the session's CSRF token;
    (None, None) without a session, (session, None) for a forged or stale form."""
    session = await _session(request, svc)
    if session is None:
        return None, None
    form = await _form(request)
    if not secrets.compare_digest(session.csrf, form.get("csrf", "")):
        return session, None
    return session, form


# -- the owner's setup and members' invitations ------------------------------------------
@dataclass(frozen=True)
class _Link:
    """A one-time link that creates an account: the owner's setup link or an invitation."""

    kind: str  # as stored: "setup" or "invite"
    title: str
    intro: str
    button: str
    dead: dict[str, str]


_SETUP = _Link(
    "setup",
    "Set up Paddock",
    "Create the owner account of this Paddock server. This link works once.",
    "Create the owner",
    {
        "used": "This setup link has been used: the owner account exists. Log in with it; "
        "the owner invites everyone else (`paddock members invite`).",
        "expired": "This setup link has expired (a link lasts 24 hours). On the server, "
        "`sudo paddockd setup-link` prints a new one.",
        "unknown": "This setup link is not valid, or a newer one replaced it. On the "
        "server, `sudo paddockd setup-link` prints a new one (it voids the others).",
    },
)
_INVITE = _Link(
    "invite",
    "Join Paddock",
    "You are invited to this Paddock server: choose a username and a password. "
    "This link works once.",
    "Create my account",
    {
        "used": "This invitation has been used.",
        "expired": "This invitation has expired: ask the server's owner for a new one.",
        "unknown": "This invitation is not valid (it may have been withdrawn): ask the "
        "server's owner for a new one.",
    },
)


def _account_form(link: _Link, token: str, csrf: str, error: str = "", username: str = "") -> str:
    return (
        f"<p>{html.escape(link.intro)}</p>"
        f"{_message(error)}<form method=post action='/{link.kind}/{html.escape(token)}'>"
        f"{_hidden(csrf)}{_field('username', 'Username', value=username)}"
        f"{_field('new', 'Password', 'password')}"
        f"<p><small>{_PASSWORD_RULES}</small></p>"
        f"{_field('again', 'Password again', 'password')}"
        f"<button type=submit>{html.escape(link.button)}</button></form>"
    )


_PASSWORD_RULES = html.escape(
    "Username: 2-32 characters, a-z first, then a-z, 0-9, '.', '_' or '-'. "
    f"Password: {MIN_PASSWORD} characters or more, not containing the username."
)


async def _dead_link(svc: Svc, link: _Link, token: str) -> HTMLResponse | None:
    owner_made = link.kind == "setup" and await svc.accounts.has_owner()
    state = "used" if owner_made else await svc.accounts.link_state(token, link.kind)
    if state == "valid":
        return None
    body = f"{_message(link.dead[state])}<p><a href=/login>Log in</a> (with an account)</p>"
    return _page(link.title, body, 404 if state == "unknown" else 410)


async def _link_page(link: _Link, token: str, request: Request, svc: Svc) -> Response:
    if (dead := await _dead_link(svc, link, token)) is not None:
        return dead
    csrf = secrets.token_urlsafe(24)
    return _with_login_csrf(request, _page(link.title, _account_form(link, token, csrf)), csrf)


async def _link_submit(link: _Link, token: str, request: Request, svc: Svc) -> Response:
    if (dead := await _dead_link(svc, link, token)) is not None:
        return dead
    form = await _form(request)
    csrf = secrets.token_urlsafe(24)
    if not _login_csrf_ok(request, form):
        text = _account_form(link, token, csrf, "The form expired; try again.")
        return _with_login_csrf(request, _page(link.title, text, 400), csrf)
    try:
        user = await svc.accounts.create_account(
            link.kind, token, form.get("username", ""), form.get("new", ""), form.get("again", "")
        )
    except PaddockError as exc:
        text = _account_form(link, token, csrf, exc.message, form.get("username", ""))
        return _with_login_csrf(request, _page(link.title, text, 400), csrf)
    # The new account is logged in at once: it just proved its password.
    address = request.client.host if request.client else "?"
    try:
        _, cookie, _ = await svc.accounts.login(address, user.username, form.get("new", ""))
    except PaddockError:
        return RedirectResponse(f"/login?created={user.username}", 303)
    return _logged_in(request, cookie, "/")


@router.get("/setup/{token}")
async def setup_page(token: str, request: Request, svc: Svc) -> Response:
    return await _link_page(_SETUP, token, request, svc)


@router.post("/setup/{token}")
async def setup(token: str, request: Request, svc: Svc) -> Response:
    return await _link_submit(_SETUP, token, request, svc)


@router.get("/invite/{token}")
async def invite_page(token: str, request: Request, svc: Svc) -> Response:
    return await _link_page(_INVITE, token, request, svc)


@router.post("/invite/{token}")
async def join(token: str, request: Request, svc: Svc) -> Response:
    return await _link_submit(_INVITE, token, request, svc)


# -- login and logout -------------------------------------------------------------------
def _next(target: str) -> str:
    """Where to go after logging in: a path on this site only (no open redirect)."""
    ok = target.startswith("/") and not target.startswith("//") and "\\" not in target
    return target if ok else "/"


def _login_form(
    csrf: str, error: str = "", note: str = "", username: str = "", after: str = "/"
) -> str:
    return (
        f"{_message(note, 'ok')}{_message(error)}<form method=post action=/login>"
        f"<input type=hidden name=next value='{html.escape(after)}'>"
        f"{_hidden(csrf)}{_field('username', 'Username', value=username)}"
        f"{_field('password', 'Password', 'password')}<button type=submit>Log in</button></form>"
    )


@router.get("/login")
async def login_page(request: Request, svc: Svc) -> Response:
    after = _next(request.query_params.get("next", "/"))
    if await _session(request, svc) is not None:
        return RedirectResponse(after, 303)
    created = request.query_params.get("created", "")
    note = f"The owner account {created} is ready: log in." if created else ""
    csrf = secrets.token_urlsafe(24)
    page = _page("Log in", _login_form(csrf, note=note, after=after))
    return _with_login_csrf(request, page, csrf)


@router.post("/login")
async def login(request: Request, svc: Svc) -> Response:
    form = await _form(request)
    csrf = secrets.token_urlsafe(24)
    username = form.get("username", "")
    if not _login_csrf_ok(request, form):
        page = _page("Log in", _login_form(csrf, "The form expired; try again.", "", username), 400)
        return _with_login_csrf(request, page, csrf)
    address = request.client.host if request.client else "?"
    try:
        _, cookie, _ = await svc.accounts.login(address, username, form.get("password", ""))
    except PaddockError as exc:
        status = 429 if isinstance(exc, TooManyAttempts) else 401
        page = _page("Log in", _login_form(csrf, exc.message, "", username), status)
        return _with_login_csrf(request, page, csrf)
    return _logged_in(request, cookie, _next(form.get("next", "/")))


def _logged_in(request: Request, cookie: str, target: str) -> Response:
    """The answer that starts a session: its cookie set, the login form's CSRF cookie gone."""
    done = RedirectResponse(target, 303)
    done.set_cookie(
        _name(request, SESSION_COOKIE),
        cookie,
        max_age=int(SESSION_MAX),
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    done.delete_cookie(_name(request, LOGIN_CSRF_COOKIE), secure=_secure(request))
    return done


@router.post("/logout")
async def logout(request: Request, svc: Svc) -> Response:
    session, form = await _signed_form(request, svc)
    if session is not None and form is None:
        return _page("Log out", _message("The form expired; go back and try again."), 400)
    if session is not None:
        await svc.accounts.logout(session_cookie(request))
    done = RedirectResponse("/login", 303)
    done.delete_cookie(_name(request, SESSION_COOKIE), secure=_secure(request))
    return done


# -- the account page -------------------------------------------------------------------
def _account(session: Session, error: str = "", note: str = "") -> str:
    user = session.user
    return (
        f"<p>Logged in as <b>{html.escape(user.username)}</b> ({user.role.value}).</p>"
        f"<form method=post action=/logout>{_hidden(session.csrf)}"
        "<button type=submit>Log out</button></form>"
        f"<h2>Change password</h2>{_message(note, 'ok')}{_message(error)}"
        f"<form method=post action=/account/password>{_hidden(session.csrf)}"
        f"{_field('password', 'Current password', 'password')}"
        f"{_field('new', 'New password (12 characters or more)', 'password')}"
        f"{_field('again', 'New password again', 'password')}"
        "<button type=submit>Change password</button></form>"
    )


@router.get("/account")
async def account(request: Request, svc: Svc) -> Response:
    session = await _session(request, svc)
    if session is None:
        return RedirectResponse("/login", 303)
    return _page("Your account", _account(session))


@router.post("/account/password")
async def change_password(request: Request, svc: Svc) -> Response:
    session, form = await _signed_form(request, svc)
    if session is None:
        return RedirectResponse("/login", 303)
    if form is None:
        return _page("Your account", _account(session, "The form expired; try again."), 400)
    try:
        await svc.accounts.change_password(
            session.user,
            session_cookie(request),
            form.get("password", ""),
            form.get("new", ""),
            form.get("again", ""),
        )
    except PaddockError as exc:
        return _page("Your account", _account(session, exc.message), 400)
    return _page("Your account", _account(session, note="Password changed."))


# -- approving a device login -----------------------------------------------------------
def _device_entry(error: str = "") -> str:
    return (
        "<p>Enter the code your terminal shows.</p>"
        f"{_message(error)}<form method=get action=/device>"
        "<label for=code>Code</label><input id=code name=code autocomplete=off "
        "placeholder=BCDF-GHJK required><button type=submit>Continue</button></form>"
    )


@router.get("/device")
async def device_page(request: Request, svc: Svc) -> Response:
    session = await _session(request, svc)
    code = request.query_params.get("code", "")
    if session is None:
        return RedirectResponse(
            f"/login?next={quote(str(request.url.path) + '?code=' + code)}", 303
        )
    if not code:
        return _page("Log in a device", _device_entry())
    try:
        grant = await svc.devices.pending(code)
    except PaddockError as exc:
        return _page("Log in a device", _device_entry(exc.message), 404)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(grant.created_at))
    body = (
        f"<p><b>{html.escape(grant.client)}</b> asks for an API token for "
        f"<b>{html.escape(session.user.username)}</b>: it could do anything you can do "
        "here.</p><p>Code <b>" + html.escape(grant.user_code) + "</b>, asked from "
        f"{html.escape(grant.address)} at {when}. Approve only if you started this "
        "yourself, just now.</p>"
        f"<form method=post action=/device>{_hidden(session.csrf)}"
        f"<input type=hidden name=code value='{html.escape(grant.user_code)}'>"
        "<button type=submit name=decision value=approve>Approve</button> "
        "<button type=submit name=decision value=deny>Deny</button></form>"
    )
    return _page("Log in a device", body)


@router.post("/device")
async def device_decide(request: Request, svc: Svc) -> Response:
    session, form = await _signed_form(request, svc)
    if session is None:
        return RedirectResponse("/login?next=/device", 303)
    if form is None:
        return _page(
            "Log in a device", _device_entry("The form expired; enter the code again."), 400
        )
    approve = form.get("decision") == "approve"
    try:
        await svc.devices.decide(session.user, form.get("code", ""), approve)
    except PaddockError as exc:
        return _page("Log in a device", _device_entry(exc.message), 404)
    text = (
        "Approved: the device is logged in; you can close this page."
        if approve
        else "Denied: the device gets no token."
    )
    return _page("Log in a device", _message(text, "ok" if approve else "err"))
