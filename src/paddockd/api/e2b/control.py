"""E2B's control-plane REST API (what the `e2b` SDK calls at E2B_API_URL), as thin routes
over E2BService. Errors take E2B's shape, `{"code": HTTP status, "message": ...}`, plus
`error_code`: Paddock's stable code."""

from __future__ import annotations

import urllib.parse
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ...domain.accounts import User
from ...domain.box import TtlAction
from ...domain.errors import InvalidRequest, PaddockError
from ...domain.header_rules import dump_rules
from ...domain.snapshot import Snapshot, drive_mount
from ...services.e2b import listing
from ...services.e2b.service import CLIENT_ID, ENVD_VERSION, MAX_FORKS, E2BService, Sandbox, api_key
from ...services.e2b.snapshots import names, snapshot_id
from ..errors import status_of


def e2b(request: Request) -> E2BService:
    svc: E2BService = request.app.state.e2b
    return svc


Svc = Annotated[E2BService, Depends(e2b)]


async def caller(request: Request, svc: Svc) -> User:
    return await svc.authenticate(api_key(request.headers.get))


Caller = Annotated[User, Depends(caller)]
router = APIRouter()


class NewSandbox(BaseModel):
    # Fields of newer SDKs that Paddock has no use for are ignored, never refused.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    template_id: str = Field("base", alias="templateID", max_length=128)
    timeout: int | None = Field(None, ge=0)
    metadata: dict[str, str] = {}
    env_vars: dict[str, str] = Field({}, alias="envVars")
    allow_internet_access: bool | None = None
    network: dict[str, Any] | None = None
    auto_pause: bool | None = Field(None, alias="autoPause")
    # What Paddock does not do is refused by name, never dropped (services/e2b/service.py).
    auto_pause_memory: bool | None = Field(None, alias="autoPauseMemory")
    auto_resume: dict[str, Any] | None = Field(None, alias="autoResume")
    mcp: dict[str, Any] | None = None
    iam: dict[str, Any] | None = None
    volume_mounts: list[dict[str, Any]] | None = Field(None, alias="volumeMounts")

    def mounts(self) -> list[tuple[str, str]]:
        """(volume name, path) of each volumeMount."""
        found = []
        for mount in self.volume_mounts or []:
            name, path = mount.get("name"), mount.get("path")
            if not isinstance(name, str) or not isinstance(path, str):
                raise InvalidRequest("a volume mount is {name, path}")
            found.append((name, path))
        return found

    def refused(self) -> list[str]:
        """The options asked for that Paddock does not offer, with what to do instead."""
        asked = {
            "mcp (Paddock offers no MCP gateway in a sandbox: `paddock mcp` serves its own)": (
                self.mcp
            ),
            "iam": self.iam,
            "keep memory on pause (a pause keeps files, not memory)": self.auto_pause_memory,
        }
        return [name for name, value in asked.items() if value]


class Timeout(BaseModel):
    timeout: int = Field(ge=0)


class ForkBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    timeout: int | None = Field(None, ge=1)
    count: int = Field(1, ge=1, le=MAX_FORKS)


class SnapshotBody(BaseModel):
    # `memory`: Paddock's snapshots are of files only, whatever is asked (docs/e2b.md).
    model_config = ConfigDict(extra="ignore")
    name: str | None = Field(None, max_length=64)


class ConnectBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    timeout: int | None = Field(None, ge=0)


def _common(svc: E2BService, s: Sandbox) -> dict[str, Any]:
    return {
        "sandboxID": s.box.id,
        "templateID": s.extras.template,
        "alias": s.extras.template,
        "clientID": CLIENT_ID,
        "envdVersion": ENVD_VERSION,
        # get_host(port) is PORT-ID.DOMAIN, which the preview proxy answers.
        "domain": svc.domain(),
    }


def _detail(svc: E2BService, s: Sandbox) -> dict[str, Any]:
    box = s.box
    started = box.started_at or box.created_at
    return {
        **_common(svc, s),
        "startedAt": started.isoformat() if started else None,
        "endAt": svc.end_at(box).isoformat(),
        "cpuCount": max(1, round(box.cpus)),
        "memoryMB": box.memory_mb,
        "diskSizeMB": box.disk_mb,
        "state": s.state,
        "metadata": s.extras.metadata,
        "allowInternetAccess": box.network.mode != "deny-all",
        "network": {
            "allowPublicTraffic": s.extras.public_traffic,
            **({"rules": dump_rules(s.extras.network_rules)} if s.extras.network_rules else {}),
        },
        "volumeMounts": [
            {"name": name, "path": path} for name, _, path in map(drive_mount, box.drives)
        ],
        "lifecycle": {
            "onTimeout": "pause" if box.ttl_action == TtlAction.STOP else "kill",
            "autoResume": s.extras.auto_resume,
        },
    }


def _created(svc: E2BService, s: Sandbox) -> dict[str, Any]:
    # The envd calls and signed file links use a token of the sandbox's own, not the key.
    return {
        **_common(svc, s),
        "envdAccessToken": svc.envd_token(s.box.id),
        "trafficAccessToken": svc.traffic_token(s),
    }


@router.post("/v2/sandboxes", status_code=201)
@router.post("/sandboxes", status_code=201)
async def create(body: NewSandbox, request: Request, svc: Svc, user: Caller) -> dict[str, Any]:
    if refused := body.refused():
        raise InvalidRequest("not supported by Paddock: " + "; ".join(refused))
    s = await svc.create(
        user,
        body.template_id,
        body.timeout,
        body.metadata,
        body.env_vars,
        body.allow_internet_access,
        body.network,
        auto_pause=bool(body.auto_pause),
        auto_resume=bool((body.auto_resume or {}).get("enabled")),
        volume_mounts=body.mounts(),
    )
    return _created(svc, s)


def _metadata_filter(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    pairs = urllib.parse.parse_qsl(raw, keep_blank_values=True)
    return {urllib.parse.unquote(k): urllib.parse.unquote(v) for k, v in pairs}


@router.get("/v2/sandboxes")
async def listed(
    response: Response,
    svc: Svc,
    user: Caller,
    metadata: str | None = None,
    state: Annotated[list[str] | None, Query()] = None,
    template: Annotated[str | None, Query(max_length=128)] = None,
    started_after: Annotated[datetime | None, Query(alias="startedAfter")] = None,
    order: Literal["asc", "desc"] = "desc",  # newest first, as E2B's (since SDK 2.45)
    limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = listing.MAX_LIMIT,
    next_token: Annotated[str | None, Query(alias="nextToken", max_length=256)] = None,
) -> list[dict[str, Any]]:
    if started_after is not None and started_after.tzinfo is None:
        started_after = started_after.replace(tzinfo=timezone.utc)
    query = listing.Query(
        _metadata_filter(metadata),
        _states(state),
        template or None,
        started_after,
        order,
        limit,
        next_token or None,
    )
    found, token = await svc.listed(user, query)
    if token is not None:
        # The SDKs' paginators read the next page's token from this header.
        response.headers["x-next-token"] = token
    return [_detail(svc, s) for s in found]


@router.get("/sandboxes")
async def listed_v1(svc: Svc, user: Caller, metadata: str | None = None) -> list[dict[str, Any]]:
    """The older route: every running sandbox at once, no pages."""
    query = listing.Query(_metadata_filter(metadata), frozenset({"running"}))
    return [_detail(svc, s) for s in (await svc.listed(user, query))[0]]


def _states(state: list[str] | None) -> frozenset[str]:
    # Both `state=running&state=paused` (the JS SDK) and `state=running,paused` (Python).
    return frozenset(p for s in state or () for p in s.split(",") if p)


@router.get("/sandboxes/{sandbox_id}")
async def info(sandbox_id: str, request: Request, svc: Svc, user: Caller) -> dict[str, Any]:
    s = await svc.get(user, sandbox_id)
    return {**_detail(svc, s), "envdAccessToken": svc.envd_token(s.box.id)}


@router.delete("/sandboxes/{sandbox_id}", status_code=204)
async def kill(sandbox_id: str, svc: Svc, user: Caller) -> None:
    await svc.kill(user, sandbox_id)


@router.post("/sandboxes/{sandbox_id}/timeout", status_code=204)
async def set_timeout(sandbox_id: str, body: Timeout, svc: Svc, user: Caller) -> None:
    await svc.set_timeout(user, sandbox_id, body.timeout)


@router.post("/sandboxes/{sandbox_id}/pause", status_code=204)
async def pause(sandbox_id: str, svc: Svc, user: Caller) -> None:
    await svc.pause(user, sandbox_id)


@router.post("/v2/sandboxes/{sandbox_id}/connect")
@router.post("/sandboxes/{sandbox_id}/connect")
@router.post("/sandboxes/{sandbox_id}/resume", status_code=201)
async def connect(
    sandbox_id: str, request: Request, svc: Svc, user: Caller, body: ConnectBody | None = None
) -> dict[str, Any]:
    s = await svc.connect(user, sandbox_id, body.timeout if body else None)
    return _created(svc, s)


class NewVolume(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(max_length=63)


# Volumes' content API is not served (api/e2b/gateway.py): the token opens nothing.
def _volume(svc: E2BService, user: User, name: str, token: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {"volumeID": name, "name": name}
    if token:  # for the volume content API (api/e2b/volume_content.py)
        found["token"] = svc.volume_token(user, name)
    return found


@router.post("/volumes", status_code=201)
async def new_volume(body: NewVolume, svc: Svc, user: Caller) -> dict[str, Any]:
    return _volume(svc, user, await svc.new_volume(user, body.name))


@router.get("/volumes")
async def list_volumes(svc: Svc, user: Caller) -> list[dict[str, Any]]:
    return [_volume(svc, user, name, token=False) for name in await svc.volumes(user)]


@router.get("/volumes/{volume_id}")
async def get_volume(volume_id: str, svc: Svc, user: Caller) -> dict[str, Any]:
    return _volume(svc, user, await svc.volume(user, volume_id))


@router.delete("/volumes/{volume_id}", status_code=204)
async def delete_volume(volume_id: str, svc: Svc, user: Caller) -> None:
    await svc.delete_volume(user, volume_id)


@router.put("/sandboxes/{sandbox_id}/network", status_code=204)
async def update_network(sandbox_id: str, body: dict[str, Any], svc: Svc, user: Caller) -> None:
    await svc.update_network(user, sandbox_id, body)


def _unix(seconds: int | None) -> datetime | None:
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise InvalidRequest(f"not a time: {seconds}") from None


@router.get("/sandboxes/{sandbox_id}/metrics")
async def metrics(
    sandbox_id: str,
    svc: Svc,
    user: Caller,
    start: Annotated[int | None, Query(ge=0)] = None,
    end: Annotated[int | None, Query(ge=0)] = None,
) -> list[dict[str, Any]]:
    return await svc.metrics(user, sandbox_id, _unix(start), _unix(end))


@router.post("/sandboxes/{sandbox_id}/fork", status_code=201)
async def fork(
    sandbox_id: str, body: ForkBody, request: Request, svc: Svc, user: Caller
) -> list[dict[str, Any]]:
    made = await svc.fork(user, sandbox_id, body.timeout, body.count)
    return [
        {"error": {"code": status_of(s), "message": s.message}}
        if isinstance(s, PaddockError)
        else {"sandbox": _created(svc, s)}
        for s in made
    ]


def _snapshot_info(snap: Snapshot) -> dict[str, Any]:
    return {"snapshotID": snapshot_id(snap), "names": names(snap)}


@router.post("/sandboxes/{sandbox_id}/snapshots", status_code=201)
async def create_snapshot(
    sandbox_id: str, svc: Svc, user: Caller, body: SnapshotBody | None = None
) -> dict[str, Any]:
    snap = await svc.snapshot(user, sandbox_id, body.name if body else None)
    return _snapshot_info(snap)


@router.get("/snapshots")
async def snapshots(
    response: Response,
    svc: Svc,
    user: Caller,
    sandbox_id: Annotated[str | None, Query(alias="sandboxID", max_length=64)] = None,
    name: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = listing.MAX_LIMIT,
    next_token: Annotated[str | None, Query(alias="nextToken", max_length=256)] = None,
) -> list[dict[str, Any]]:
    found, token = await svc.snapshots.listed(user, sandbox_id, name, limit, next_token)
    if token is not None:
        response.headers["x-next-token"] = token
    return [_snapshot_info(s) for s in found]


@router.delete("/templates/{template_id}", status_code=204)
async def delete_template(template_id: str, svc: Svc, user: Caller) -> None:
    """E2B deletes a snapshot as a template: a snapshot's id, or a template's name."""
    await svc.delete_template(user, template_id)
