"""/v1/templates: build a template from a Dockerfile (its context as the request body),
take one from a box, list, follow a build's log, rebuild, share and delete."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from paddock.wire.models import Template as TemplateModel
from paddock.wire.models import TemplateDefaults, TemplateFromBox, TemplateList, TemplateShare

from ...domain.accounts import User
from ...domain.network import policy
from ...domain.templates import (
    BOX_IMAGE,
    Defaults,
    Template,
    parse_env,
    validate_template_name,
)
from ...services.templates import BuildOptions, Given
from ..deps import Caller, Services, Svc

router = APIRouter(prefix="/templates", tags=["templates"])


def _when(at: float | None) -> datetime | None:
    return datetime.fromtimestamp(at, timezone.utc) if at else None


async def present(svc: Services, t: Template, caller: User) -> TemplateModel:
    owners = await svc.accounts.owners()
    base = t.base if t.base == BOX_IMAGE else (await svc.templates.name_of(t.base))
    d = t.defaults
    return TemplateModel(
        name=t.name,
        status=t.status,
        base=base,
        owner=owners.get(t.owner_id, "(removed user)"),
        mine=t.owner_id == caller.holder,
        shared=t.shared,
        size_bytes=t.size,
        created_at=_when(t.created_at) or datetime.now(timezone.utc),
        source="dockerfile" if t.dockerfile is not None else "box",
        message=t.message,
        built_at=_when(t.built_at),
        stale=await svc.templates.stale(t),
        env=[f"{k}={v}" for k, v in t.env],
        user=t.user,
        workdir=t.workdir,
        start_cmd=t.start_cmd,
        defaults=TemplateDefaults(
            type=d.type,
            ttl=d.ttl,
            network=d.network,  # type: ignore[arg-type]
            allow=list(d.allow),
            drives=list(d.drives),
            idle_stop=d.idle_stop,
        ),
    )


def _defaults(d: TemplateDefaults) -> Defaults:
    if d.network is not None:
        policy(d.network, d.allow)  # bad input is refused when the template is made
    return Defaults(d.type, d.ttl, d.network, tuple(d.allow), tuple(d.drives), d.idle_stop)


@router.get("", response_model=TemplateList, summary="Your templates and the shared ones")
async def list_templates(svc: Svc, caller: Caller) -> TemplateList:
    return TemplateList(
        templates=[await present(svc, t, caller) for t in await svc.templates.listed(caller)]
    )


@router.post(
    "", status_code=201, response_model=TemplateModel, summary="A template of a box's files"
)
async def template_from_box(body: TemplateFromBox, svc: Svc, caller: Caller) -> TemplateModel:
    given = Given(parse_env(body.env), body.start_cmd, _defaults(body.defaults))
    made = await svc.templates.from_box(body.name, body.box, body.snapshot, given, caller)
    return await present(svc, made, caller)


@router.post(
    "/{name}/build",
    status_code=202,
    response_model=TemplateModel,
    summary="Build a template from a Dockerfile in a build box; the body is the context (a "
    "tar). Follow the build at /log.",
    openapi_extra={
        "requestBody": {
            "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
            "required": False,
        }
    },
)
async def build_template(
    name: str,
    request: Request,
    svc: Svc,
    caller: Caller,
    dockerfile: Annotated[str, Query(max_length=1024)] = "Dockerfile",
    base: Annotated[str | None, Query(alias="from", max_length=64)] = None,
    build_arg: Annotated[list[str] | None, Query()] = None,
    type: Annotated[str | None, Query(max_length=64)] = None,  # noqa: A002 - the API's word
    network: Annotated[str | None, Query(max_length=16)] = None,
    allow: Annotated[list[str] | None, Query()] = None,
    timeout: int = 1800,
    env: Annotated[list[str] | None, Query()] = None,
    start_cmd: Annotated[str | None, Query(max_length=4096)] = None,
    default_type: Annotated[str | None, Query(max_length=64)] = None,
    default_ttl: int | None = None,
    default_network: Annotated[str | None, Query(max_length=16)] = None,
    default_allow: Annotated[list[str] | None, Query()] = None,
    default_drive: Annotated[list[str] | None, Query()] = None,
    default_idle_stop: int | None = None,
) -> TemplateModel:
    mode = network or ("allowlist" if allow else None)
    options = BuildOptions(
        dockerfile=dockerfile,
        build_args=parse_env(build_arg or []),
        box_type=type,
        network=policy(mode, allow or []) if mode else None,
        timeout=timeout,
        base=base and (base if base == BOX_IMAGE else validate_template_name(base)),
    )
    defaults = TemplateDefaults(
        type=default_type,
        ttl=default_ttl,
        network=default_network,  # type: ignore[arg-type]
        allow=default_allow or [],
        drives=default_drive or [],
        idle_stop=default_idle_stop,
    )
    given = Given(parse_env(env or []), start_cmd, _defaults(defaults))
    made = await svc.templates.build(name, request.stream(), options, given, caller)
    return await present(svc, made, caller)


@router.get("/{name}", response_model=TemplateModel, summary="Show a template")
async def get_template(name: str, svc: Svc, caller: Caller) -> TemplateModel:
    return await present(svc, await svc.templates.find(name, caller), caller)


@router.get(
    "/{name}/log",
    summary="The template's last build as newline-delimited JSON events (with follow, live "
    "until it ends)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def template_log(
    name: str, svc: Svc, caller: Caller, follow: bool = True
) -> StreamingResponse:
    await svc.templates.find(name, caller)  # a 404 before the stream starts

    async def events() -> AsyncIterator[bytes]:
        async for event in svc.templates.follow(name, live=follow, caller=caller):
            yield json.dumps(event).encode() + b"\n"

    return StreamingResponse(events(), media_type="application/x-ndjson")


@router.post(
    "/{name}/rebuild",
    status_code=202,
    response_model=TemplateModel,
    summary="Build the template again from its Dockerfile and context, on today's box image",
)
async def rebuild_template(name: str, svc: Svc, caller: Caller) -> TemplateModel:
    return await present(svc, await svc.templates.rebuild(name, caller), caller)


@router.put(
    "/{name}/shared",
    response_model=TemplateModel,
    summary="Share one of your templates with everyone on the server, or stop (the owner's)",
)
async def share_template(name: str, body: TemplateShare, svc: Svc, caller: Caller) -> TemplateModel:
    return await present(svc, await svc.templates.share(name, body.shared, caller), caller)


@router.delete("/{name}", status_code=204, summary="Delete one of your templates")
async def delete_template(name: str, svc: Svc, caller: Caller) -> None:
    await svc.templates.delete(name, caller)
