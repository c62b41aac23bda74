"""What routes receive: the services (from app state) and the caller's verified token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from ..config import Config
from ..domain.errors import Unauthorized
from ..images.builder import ImageBuilder
from ..services.agents import AgentService
from ..services.boxes import BoxService
from ..services.credentials import CredentialService
from ..services.desktop import DesktopService
from ..services.drives import DriveService
from ..services.egress import EgressService
from ..services.runs import RunService
from ..services.snapshots import SnapshotService
from ..services.stats import StatsService
from ..services.system import SystemService
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
    agents: AgentService
    runs: RunService
    stats: StatsService


def services(conn: HTTPConnection) -> Services:
    svc: Services = conn.app.state.services
    return svc


async def authenticate(conn: HTTPConnection) -> None:
    header = conn.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "missing API token: run `paddock login URL` (it asks for the token; "
            "`--token-stdin` reads it from a pipe) or set PADDOCK_TOKEN"
        )
    if not await services(conn).tokens.verify(token.strip()):
        raise Unauthorized("the API token was not accepted (wrong, or revoked)")


Svc = Annotated[Services, Depends(services)]
