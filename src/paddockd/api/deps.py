"""What routes receive: the services (from app state) and the caller's verified token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from ..config import Config
from ..domain.accounts import User
from ..domain.errors import Forbidden, Unauthorized
from ..images.builder import ImageBuilder
from ..services.accounts import AccountService
from ..services.agents import AgentService
from ..services.audit import AuditService
from ..services.boxes import BoxService
from ..services.credentials import CredentialService
from ..services.desktop import DesktopService
from ..services.devices import DeviceService
from ..services.drives import DriveService
from ..services.e2b.service import E2BService
from ..services.egress import EgressService
from ..services.events import EventService
from ..services.files import FileService
from ..services.members import MemberService, TokenService
from ..services.metrics import Metrics
from ..services.portable import PortableService
from ..services.previews import PreviewService
from ..services.runs import RunService
from ..services.secrets import SecretService
from ..services.settings import SettingsService
from ..services.snapshots import SnapshotService
from ..services.ssh import SshService
from ..services.stats import StatsService
from ..services.system import SystemService
from ..services.templates import TemplateService
from ..services.terminals import TerminalService
from ..services.webhooks import WebhookService
from ..store.tokens import TokenRepository


@dataclass(frozen=True)
class Services:
    config: Config
    boxes: BoxService
    system: SystemService
    tokens: TokenRepository
    images: ImageBuilder
    snapshots: SnapshotService
    drives: DriveService
    egress: EgressService
    desktop: DesktopService
    credentials: CredentialService
    secrets: SecretService
    templates: TemplateService
    agents: AgentService
    runs: RunService
    stats: StatsService
    accounts: AccountService
    devices: DeviceService
    user_tokens: TokenService
    members: MemberService
    previews: PreviewService
    events: EventService
    terminals: TerminalService
    files: FileService
    portable: PortableService
    ssh: SshService
    audit: AuditService
    metrics: Metrics
    webhooks: WebhookService
    settings: SettingsService
    e2b: E2BService | None = None


def services(conn: HTTPConnection) -> Services:
    svc: Services = conn.app.state.services
    return svc


SESSION_COOKIE = "paddock_session"


def cookie_name(base: str, secure: bool) -> str:
    """Under HTTPS, `__Host-` + base: a browser takes such a cookie only from this very host
    (Secure, Path=/, no Domain), so a preview served on a subdomain (PORT-BOX.HOST) cannot
    plant a session or login cookie of its choosing on the server's own host."""
    return "__Host-" + base if secure else base


def is_secure(conn: HTTPConnection) -> bool:
    # Behind Caddy, uvicorn takes the scheme from X-Forwarded-Proto (loopback peers only).
    return conn.url.scheme in ("https", "wss")


def session_cookie(conn: HTTPConnection) -> str:
    return conn.cookies.get(cookie_name(SESSION_COOKIE, is_secure(conn)), "")


CSRF_HEADER = "x-csrf-token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


async def authenticate(conn: HTTPConnection, scope: str | None = None) -> User:
    """The caller, from an API token (Bearer) or a web session's cookie. A cookie rides
    along with any request a browser makes, so with one a change also needs the session's
    CSRF token (header X-CSRF-Token) and a WebSocket a same-origin Origin. `scope`: the
    one place a scoped token is taken too (/metrics); everywhere else it is refused."""
    header = conn.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    cookie = session_cookie(conn)
    if not header and cookie:
        return await _session_auth(conn, cookie)
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "missing API token: run `paddock login URL` (it asks for the token; "
            "`--token-stdin` reads it from a pipe) or set PADDOCK_TOKEN"
        )
    user = await services(conn).tokens.verify(token.strip(), scope)
    if user is None:
        raise Unauthorized("the API token was not accepted (wrong, or revoked)")
    return user


async def _session_auth(conn: HTTPConnection, cookie: str) -> User:
    import secrets

    session = await services(conn).accounts.session(cookie)
    if session is None:
        raise Unauthorized("the web session has ended: log in again")
    if conn.scope["type"] == "websocket":
        origin = conn.headers.get("origin", "")
        host = conn.headers.get("host", "")
        if origin.partition("://")[2] != host:
            raise Unauthorized("a WebSocket with a session cookie must come from this site")
    elif conn.scope.get("method", "GET") not in _SAFE:
        sent = conn.headers.get(CSRF_HEADER, "")
        if not sent or not secrets.compare_digest(sent, session.csrf):
            raise Unauthorized("a change through a web session needs its CSRF token (X-CSRF-Token)")
    return session.user


CALLER = "caller"


def caller(conn: HTTPConnection) -> User:
    """Who is calling, as the token gate (gate.py) found before the route ran."""
    user: User | None = conn.scope.get("state", {}).get(CALLER)
    if user is None:  # a route outside the gate asked for a caller: a wiring mistake
        raise Unauthorized("this request carries no verified caller")
    return user


Svc = Annotated[Services, Depends(services)]
Caller = Annotated[User, Depends(caller)]


def owner(user: Caller) -> User:
    """The caller, if they are the server's owner: for administration (members), which
    concerns no single user's resource and so reveals nothing."""
    if not user.is_owner:
        raise Forbidden("only the server's owner may do this")
    return user


Owner = Annotated[User, Depends(owner)]
