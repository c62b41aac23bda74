"""E2B's volume content API (E2B_VOLUME_API_URL=https://HOST/e2b): a volume's files, for
the bearer of its token (`Volume.create`/`connect` give it), as thin routes over
services/e2b/volumes.py. The token is checked before any body is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
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


@dataclass(frozen=True)
class Made:
    """Who owns what a call makes, and whether the folders on its way are made too
    (`force`). Unasked, E2B's user (the box user) owns it."""

    uid: Id = None
    gid: Id = None
    mode: Mode = None
    force: bool = False

    def ids(self, mode: int) -> tuple[int, int, int]:
        return (
            1000 if self.uid is None else self.uid,
            1000 if self.gid is None else self.gid,
            mode if self.mode is None else self.mode,
        )


Making = Annotated[Made, Depends()]


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
    made: Making,
    authorization: Auth = "",
) -> dict[str, Any]:
    ids = made.ids(0o755)
    return await _content(request).make_dir(volume_id, authorization, path, ids, made.force)


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
async def remove(volume_id: str, request: Request, path: Path, authorization: Auth = "") -> None:
    await _content(request).remove(volume_id, authorization, path)


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
    made: Making,
    authorization: Auth = "",
) -> dict[str, Any]:
    return await _content(request).write(
        volume_id, authorization, path, made.ids(0o644), made.force, request.stream()
    )
