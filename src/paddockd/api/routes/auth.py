"""/v1/auth: the caller's own model-provider credentials (write-only secrets), and
attaching them to boxes (a box gets its owner's); /v1/agents: the coding agents in the box
image and whether the caller has a key for them."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import (
    AgentInfo,
    AgentList,
    BoxAuth,
    Credential,
    CredentialList,
    CredentialSet,
    CredentialUse,
    CredentialUseList,
)

from ...services.credentials import ProviderStatus
from ...store.secrets import Use
from ..deps import Caller, Svc

router = APIRouter(tags=["auth"])


def present(s: ProviderStatus) -> Credential:
    used = datetime.fromtimestamp(s.last_used_at, timezone.utc) if s.last_used_at else None
    return Credential(
        provider=s.provider,
        configured=s.configured,
        base_url=s.base_url,
        last_used_at=used,
        mode=s.mode,
    )


def present_use(u: Use) -> CredentialUse:
    return CredentialUse(
        box=u.box_name,
        kind=u.kind,
        name=u.name,
        host=u.host,
        method=u.method,
        path=u.path,
        status=u.status,
        outcome="refused" if u.outcome == "refused" else "used",
        at=datetime.fromtimestamp(u.at, timezone.utc),
        reason=u.reason,
    )


@router.get(
    "/auth", response_model=CredentialList, summary="Providers and whether you set a key for each"
)
async def list_credentials(svc: Svc, caller: Caller) -> CredentialList:
    return CredentialList(providers=[present(s) for s in await svc.credentials.statuses(caller)])


@router.put(
    "/auth/{provider}",
    response_model=Credential,
    summary="Set your API key for a provider (stored encrypted; never returned)",
)
async def set_credential(
    provider: str, body: CredentialSet, svc: Svc, caller: Caller
) -> Credential:
    return present(await svc.credentials.set(provider, body.key, body.base_url, caller, body.mode))


@router.get(
    "/auth/log",
    response_model=CredentialUseList,
    summary="Your provider keys' uses through the credential gateway, newest first",
)
async def key_log(
    svc: Svc,
    caller: Caller,
    provider: str | None = None,
    box: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> CredentialUseList:
    uses = await svc.secrets.uses(caller, "provider", provider, box, limit)
    return CredentialUseList(uses=[present_use(u) for u in uses])


@router.delete("/auth/{provider}", status_code=204, summary="Forget your key for a provider")
async def delete_credential(provider: str, svc: Svc, caller: Caller) -> None:
    await svc.credentials.delete(provider, caller)


@router.get("/boxes/{ref}/auth", response_model=BoxAuth, summary="Providers attached to a box")
async def box_auth(ref: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.attached(ref, caller))


@router.put(
    "/boxes/{ref}/auth/{provider}",
    response_model=BoxAuth,
    summary="Attach the box owner's key for a provider: its commands get its environment",
)
async def attach(ref: str, provider: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.attach(ref, provider, caller))


@router.delete("/boxes/{ref}/auth/{provider}", response_model=BoxAuth, summary="Detach it")
async def detach(ref: str, provider: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.detach(ref, provider, caller))


@router.get("/agents", response_model=AgentList, summary="Coding agents in the box image")
async def list_agents(svc: Svc, caller: Caller) -> AgentList:
    return AgentList(
        agents=[
            AgentInfo(
                name=a.name,
                command=a.command,
                package=a.package,
                version=a.version,
                providers=list(a.providers),
                credentials=a.credentials,
                note=a.note,
            )
            for a in await svc.agents.all(caller)
        ]
    )
