"""/v1/secrets: the caller's own secrets bound to hosts (write-only values), attaching them
to boxes (a box gets placeholders for its owner's), and the log of their uses through the
credential gateway."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import BoxSecrets, CredentialUseList, Secret, SecretList, SecretSet

from ...services.secrets import SecretStatus
from ..deps import Caller, Svc
from .auth import present_use

router = APIRouter(tags=["secrets"])


def _when(at: float | None) -> datetime | None:
    return datetime.fromtimestamp(at, timezone.utc) if at else None


def present(s: SecretStatus) -> Secret:
    return Secret(
        name=s.rule.name,
        hosts=list(s.rule.hosts),
        header=s.rule.header,
        format=s.rule.format,
        created_at=_when(s.created_at),
        last_used_at=_when(s.last_used_at),
        boxes=list(s.boxes),
    )


@router.get("/secrets", response_model=SecretList, summary="Your secrets (never their values)")
async def list_secrets(svc: Svc, caller: Caller) -> SecretList:
    return SecretList(secrets=[present(s) for s in await svc.secrets.all(caller)])


@router.get(
    "/secrets/log",
    response_model=CredentialUseList,
    summary="Your secrets' uses through the credential gateway, newest first",
)
async def secret_log(
    svc: Svc,
    caller: Caller,
    name: str | None = None,
    box: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> CredentialUseList:
    uses = await svc.secrets.uses(caller, "secret", name, box, limit)
    return CredentialUseList(uses=[present_use(u) for u in uses])


@router.put(
    "/secrets/{name}",
    response_model=Secret,
    summary="Set a secret bound to hosts (stored encrypted; its value is never returned)",
)
async def set_secret(name: str, body: SecretSet, svc: Svc, caller: Caller) -> Secret:
    return present(
        await svc.secrets.set(name, body.value, body.hosts, body.header, body.format, caller)
    )


@router.delete("/secrets/{name}", status_code=204, summary="Forget a secret")
async def delete_secret(name: str, svc: Svc, caller: Caller) -> None:
    await svc.secrets.delete(name, caller)


@router.get("/boxes/{ref}/secrets", response_model=BoxSecrets, summary="Secrets attached to a box")
async def box_secrets(ref: str, svc: Svc, caller: Caller) -> BoxSecrets:
    return BoxSecrets(secrets=await svc.secrets.attached(ref, caller))


@router.put(
    "/boxes/{ref}/secrets/{name}",
    response_model=BoxSecrets,
    summary="Attach the box owner's secret: $NAME in the box holds its placeholder",
)
async def attach(ref: str, name: str, svc: Svc, caller: Caller) -> BoxSecrets:
    return BoxSecrets(secrets=await svc.secrets.attach(ref, name, caller))


@router.delete("/boxes/{ref}/secrets/{name}", response_model=BoxSecrets, summary="Detach it")
async def detach(ref: str, name: str, svc: Svc, caller: Caller) -> BoxSecrets:
    return BoxSecrets(secrets=await svc.secrets.detach(ref, name, caller))
