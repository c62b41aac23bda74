"""E2B's template build API (what the SDK's `Template.build` and `Template.exists` call), as
thin routes over E2BTemplates: request a build, a link per COPY's files, the upload to
that link, start, status with logs, an alias's lookup, delete."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ...domain.accounts import holder_of
from ...domain.errors import Forbidden
from ...domain.templates import Template
from ...services.e2b.service import ENVD_VERSION
from .control import Caller, Svc

router = APIRouter()
UPLOADS = "/template-files"  # the upload links' path (authenticated by their key)


class BuildRequest(BaseModel):
    # cpuCount, memoryMB, minFreeDiskMB: a box's size is its type's here (`template` defaults).
    model_config = ConfigDict(extra="ignore")
    name: str = Field(max_length=128)
    tags: list[str] = Field([], max_length=100)


class BuildStart(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    steps: list[dict[str, Any]] = Field([], max_length=200)
    from_image: str | None = Field(None, alias="fromImage", max_length=512)
    from_template: str | None = Field(None, alias="fromTemplate", max_length=128)
    from_image_registry: dict[str, Any] | None = Field(None, alias="fromImageRegistry")
    start_cmd: str | None = Field(None, alias="startCmd", max_length=4096)
    ready_cmd: str | None = Field(None, alias="readyCmd", max_length=4096)


@router.post("/v3/templates", status_code=202)
async def request_build(body: BuildRequest, svc: Svc, user: Caller) -> dict[str, Any]:
    p = await svc.templates_of().request(user, body.name, body.tags)
    base = p.name.partition(":")[0]
    return {
        "templateID": p.name,
        "buildID": p.build_id,
        "public": False,
        "names": [p.name],
        "aliases": [base],
        "tags": p.tags or ["default"],
    }


class TagAssignment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    target: str = Field(max_length=128)
    tags: list[str] = Field(max_length=100)


class TagRemoval(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(max_length=128)
    tags: list[str] = Field(max_length=100)


def _build_id(t: Template) -> str:
    # The SDK reads a build id as a UUID: one made from the template's id, always the same.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"paddock-template:{t.id}"))


@router.post("/templates/tags", status_code=201)
async def assign_tags(body: TagAssignment, svc: Svc, user: Caller) -> dict[str, Any]:
    built = await svc.templates_of().assign(user, body.target, body.tags)
    return {"tags": list(dict.fromkeys(body.tags)), "buildID": _build_id(built)}


@router.delete("/templates/tags", status_code=204)
async def remove_tags(svc: Svc, user: Caller, body: TagRemoval | None = None) -> None:
    if body is None:  # no body: the SDK deleting a template named `tags`
        await svc.delete_template(user, "tags")
    else:
        await svc.templates_of().untag(user, body.name, body.tags)


@router.get("/templates/{template_id}/tags")
async def get_tags(template_id: str, svc: Svc, user: Caller) -> list[dict[str, Any]]:
    found = await svc.templates_of().tags(user, template_id)
    return [
        {
            "tag": tag,
            "buildID": _build_id(built),
            "createdAt": datetime.fromtimestamp(at, timezone.utc).isoformat(),
        }
        for tag, built, at in found
    ]


@router.get("/templates/{template_id}/files/{files_hash}", status_code=201)
async def upload_link(
    template_id: str, files_hash: str, request: Request, svc: Svc, user: Caller
) -> dict[str, Any]:
    p = svc.templates_of().upload_link(user, template_id, files_hash)
    base = str(request.base_url).rstrip("/")
    return {"present": False, "url": f"{base}{UPLOADS}/{p.key}/{files_hash}"}


@router.put(UPLOADS + "/{key}/{files_hash}", status_code=200)
async def upload(key: str, files_hash: str, request: Request, svc: Svc) -> Response:
    # The gateway let this through on the key alone (the SDK sends no API key here).
    builds = svc.templates_of()
    await builds.receive(builds.uploader(key), files_hash, request.stream())
    return Response(status_code=200)


@router.post("/v2/templates/{template_id}/builds/{build_id}", status_code=202)
async def start_build(
    template_id: str, build_id: str, body: BuildStart, svc: Svc, user: Caller
) -> Response:
    spec = body.model_dump(by_alias=True, exclude_none=True)
    await svc.templates_of().start(user, template_id, build_id, spec)
    return Response(status_code=202)


@router.get("/templates/{template_id}/builds/{build_id}/status")
async def build_status(
    template_id: str,
    build_id: str,
    svc: Svc,
    user: Caller,
    logs_offset: Annotated[int, Query(alias="logsOffset", ge=0)] = 0,
) -> dict[str, Any]:
    return await svc.templates_of().status(user, template_id, build_id, logs_offset)


@router.get("/templates")
@router.get("/v2/templates")
async def listed(svc: Svc, user: Caller) -> list[dict[str, Any]]:
    """E2B's template listing: each of the caller's templates (and those shared with
    them) as one build of its own name; sizes are the box type's the template starts."""
    found = []
    listed = sorted(
        await svc.templates_of().listed(user), key=lambda t: t.owner_id != holder_of(user)
    )
    shown = {t.name: t for t in reversed(listed)}  # one's own over a shared one of its name
    for t in sorted(shown.values(), key=lambda t: t.name):
        box_type = svc.box_type(t.defaults.type)
        at = datetime.fromtimestamp(t.built_at or t.created_at, timezone.utc).isoformat()
        found.append(
            {
                "templateID": t.name,
                "buildID": _build_id(t),
                "cpuCount": max(1, round(box_type.cpus)),
                "memoryMB": box_type.memory_mb,
                "diskSizeMB": t.size >> 20,
                "public": t.shared,
                "aliases": [t.name],
                "names": [t.name],
                "createdAt": datetime.fromtimestamp(t.created_at, timezone.utc).isoformat(),
                "updatedAt": at,
                "createdBy": None,
                "lastSpawnedAt": None,
                "spawnCount": 0,
                "buildCount": 1,
                "envdVersion": ENVD_VERSION,
                "buildStatus": {"ready": "ready", "building": "building"}.get(t.status, "error"),
            }
        )
    return found


@router.get("/templates/aliases/{alias}")
async def alias(alias: str, svc: Svc, user: Caller) -> dict[str, Any]:
    t = await svc.templates_of().find(user, alias)
    if t.owner_id != holder_of(user):
        # E2B's answer for a name that exists and is someone else's (shared with you).
        raise Forbidden(f"template {t.name} is shared with you, not yours")
    return {"templateID": t.name, "public": t.shared}
