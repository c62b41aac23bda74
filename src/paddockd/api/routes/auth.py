"""/v1/auth: model-provider credentials (write-only secrets), and attaching them to boxes;
/v1/agents: the coding agents in the box image and whether they have a key."""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter, Response

from paddock._models import (
    AgentInfo,
    AgentList,
    BoxAuth,
    Credential,
    CredentialList,
    CredentialSet,
)

from ...services.credentials import ProviderStatus
from ..deps import Caller, Owner, Svc

router = APIRouter(tags=["auth"])


def present(s: ProviderStatus) -> Credential:
    used = datetime.fromtimestamp(s.last_used_at, timezone.utc) if s.last_used_at else None
    return Credential(
        provider=s.provider, configured=s.configured, base_url=s.base_url, last_used_at=used
    )


@router.get("/auth", response_model=CredentialList, summary="Providers and whether each is set")
async def list_credentials(svc: Svc, _: Owner) -> CredentialList:
    return CredentialList(providers=[present(s) for s in await svc.credentials.statuses()])


@router.put(
    "/auth/{provider}",
    response_model=Credential,
    summary="Set a provider's API key (stored encrypted; never returned)",
)
async def set_credential(provider: str, body: CredentialSet, svc: Svc, _: Owner) -> Credential:
    return present(await svc.credentials.set(provider, body.key, body.base_url))


@router.delete("/auth/{provider}", status_code=204, summary="Forget a provider's key")
async def delete_credential(provider: str, svc: Svc, _: Owner) -> Response:
    await svc.credentials.delete(provider)
    return Response(status_code=204)


@router.get("/boxes/{ref}/auth", response_model=BoxAuth, summary="Providers attached to a box")
async def box_auth(ref: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.attached(ref, caller))


@router.put(
    "/boxes/{ref}/auth/{provider}",
    response_model=BoxAuth,
    summary="Attach a provider's key to a box: its commands get the key's environment",
)
async def attach(ref: str, provider: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.attach(ref, provider, caller))


@router.delete("/boxes/{ref}/auth/{provider}", response_model=BoxAuth, summary="Detach it")
async def detach(ref: str, provider: str, svc: Svc, caller: Caller) -> BoxAuth:
    return BoxAuth(providers=await svc.credentials.detach(ref, provider, caller))


@router.get("/agents", response_model=AgentList, summary="Coding agents in the box image")
async def list_agents(svc: Svc) -> AgentList:
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
            for a in await svc.agents.all()
        ]
    )
