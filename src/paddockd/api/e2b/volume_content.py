"""E2B's volume content API (E2B_VOLUME_API_URL=https://HOST/e2b): a volume's files, for
the bearer of its token (`Volume.create`/`connect` give it), as thin routes over
services/e2b/volumes.py. The token is checked before any body is read."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ...domain.errors import InvalidRequest
from ...services.e2b.volumes import VolumeContent

PREFIX = "/volumecontent"
router = APIRouter(prefix=PREFIX + "/{volume_id}")

Auth = Annotated[str, Header(alias="authorization")]
Path = Annotated[str, Query(max_length=4096)]
Id = Annotated[int | None, Query(ge=0, lt=65536)]
Mode = Annotated[int | None, Query(ge=0, le=0o7777)]


def _content(request: Request) -> VolumeContent:
    found: VolumeContent | None = request.app.state.e2b.volume_content
    if found is None:
        raise InvalidRequest("this server has no drives")
    return found


class Metadata(BaseModel):
    model_config = ConfigDict(extra="ignore")
    uid: int | None = Field(None, ge=0, lt=65536)
    gid: int | None = Field(None, ge=0, lt=65536)
    mode: int | None = Field(None, ge=0, le=0o7777)


def _ids(uid: int | None, gid: int | None, mode: int | None, default: int) -> tuple[int, int, int]:
    # What E2B's user would own: the box user, unless asked otherwise.
    return (
        1000 if uid is None else uid,
        1000 if gid is None else gid,
        default if mode is None else mode,
    )


@router.get("/dir")
async def listing(
    volume_id: str,
    request: Request,
    authorization: Auth = "",
    path: Path = "/",
    depth: Annotated[int, Query(ge=1, le=32)] = 1,
) -> list[dict[str, Any]]:
    return await _content(request).listing(volume_id, authorization, path, depth)


@router.post("/dir", status_code=201)
async def make_dir(
    volume_id: str,
    request: Request,
    path: Path,
    authorization: Auth = "",
    uid: Id = None,
    gid: Id = None,
    mode: Mode = None,
    force: bool = False,
) -> dict[str, Any]:
    ids = _ids(uid, gid, mode, 0o755)
    return await _content(request).make_dir(volume_id, authorization, path, ids, force)


@router.get("/path")
async def info(
    volume_id: str, request: Request, path: Path, authorization: Auth = ""
) -> dict[str, Any]:
    return await _content(request).info(volume_id, authorization, path)


@router.patch("/path")
async def set_metadata(
    volume_id: str, request: Request, path: Path, body: Metadata, authorization: Auth = ""
) -> dict[str, Any]:
    return await _content(request).set_metadata(
        volume_id, authorization, path, body.uid, body.gid, body.mode
    )


@router.delete("/path", status_code=204)
async def remove(
    volume_id: str, request: Request, path: Path, authorization: Auth = ""
) -> Response:
    await _content(request).remove(volume_id, authorization, path)
    return Response(status_code=204)


@router.get("/file")
async def read(
    volume_id: str, request: Request, path: Path, authorization: Auth = ""
) -> StreamingResponse:
    chunks = await _content(request).read(volume_id, authorization, path)
    return StreamingResponse(chunks, media_type="application/octet-stream")


@router.put("/file", status_code=201)
async def write(
    volume_id: str,
    request: Request,
    path: Path,
    authorization: Auth = "",
    uid: Id = None,
    gid: Id = None,
    mode: Mode = None,
    force: bool = False,
) -> dict[str, Any]:
    ids = _ids(uid, gid, mode, 0o644)
    return await _content(request).write(
        volume_id, authorization, path, ids, force, request.stream()
    )
