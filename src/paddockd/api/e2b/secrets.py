"""E2B's Secrets API (`Secret.create`, `update`, `get_info`, `list`, `destroy`): thin routes
over services/e2b/secrets.py. A secret is found by its id or its name; its value is taken,
never given back."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ...domain.errors import InvalidRequest
from ...services.e2b.secrets import MAX_LIMIT, E2BSecrets
from ...services.e2b.service import E2BService
from ...store.e2b_secrets import E2BSecret
from .control import Caller, Svc

router = APIRouter()


class NewSecret(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(max_length=128)
    value: str = Field(max_length=8192)
    metadata: dict[str, str] | None = None


class SecretUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")
    value: str = Field(max_length=8192)
    metadata: dict[str, str] | None = None


def _of(svc: E2BService) -> E2BSecrets:
    if svc.secrets is None:
        raise InvalidRequest("this server keeps no E2B secrets")
    return svc.secrets


def _shown(s: E2BSecret) -> dict[str, Any]:
    def at(stamp: float) -> str:
        return datetime.fromtimestamp(stamp, timezone.utc).isoformat()

    return {
        "secretID": s.secret_id,
        "name": s.name,
        "currentVersion": s.version,
        "metadata": s.metadata,
        "createdAt": at(s.created_at),
        "updatedAt": at(s.updated_at),
    }


@router.post("/secrets", status_code=201)
async def create(body: NewSecret, svc: Svc, user: Caller) -> dict[str, Any]:
    return _shown(await _of(svc).create(user, body.name, body.value, body.metadata))


@router.get("/secrets")
async def listed(
    response: Response,
    svc: Svc,
    user: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = MAX_LIMIT,
    next_token: Annotated[str | None, Query(alias="nextToken", max_length=256)] = None,
) -> list[dict[str, Any]]:
    found, token = await _of(svc).listed(user, limit, next_token)
    if token is not None:
        response.headers["x-next-token"] = token
    return [_shown(s) for s in found]


@router.get("/secrets/{secret}")
async def info(secret: str, svc: Svc, user: Caller) -> dict[str, Any]:
    return _shown(await _of(svc).get(user, secret))


@router.post("/secrets/{secret}")
async def update(secret: str, body: SecretUpdate, svc: Svc, user: Caller) -> dict[str, Any]:
    return _shown(await _of(svc).update(user, secret, body.value, body.metadata))


@router.delete("/secrets/{secret}", status_code=204)
async def destroy(secret: str, svc: Svc, user: Caller) -> None:
    await _of(svc).delete(user, secret)
