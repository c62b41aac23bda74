"""envd's REST side: `/files` (upload, download) and `/health`. A file goes in and out of a
box the way `paddock push`/`pull` move it (BoxService.push/pull, tar streams): an upload
becomes a one-member tar built on the fly, a download is that member's bytes, streamed."""

from __future__ import annotations

import posixpath
import tarfile
import tempfile
import time
import zlib
from collections.abc import AsyncIterator
from typing import IO, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.datastructures import UploadFile

from ..domain.errors import InvalidRequest, InvalidState, PaddockError
from ..services.boxes import box_path
from .envd import target
from .service import E2BService

router = APIRouter()
_BLOCK = 512
_CHUNK = 1 << 20
# Up to this much of an upload of unknown length stays in memory; the rest spills to disk.
_SPOOL = 8 << 20


def _e2b(request: Request) -> E2BService:
    svc: E2BService = request.app.state.e2b
    return svc


def _owner(user: str) -> tuple[int, int]:
    return (0, 0) if user in ("root", "0") else (1000, 1000)


def _header(name: str, size: int, owner: tuple[int, int]) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.uid, info.gid = owner
    info.mtime = int(time.time())
    return info.tobuf(format=tarfile.PAX_FORMAT)


async def _tar_one(
    name: str, size: int, owner: tuple[int, int], body: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    yield _header(name, size, owner)
    sent = 0
    async for chunk in body:
        sent += len(chunk)
        if sent > size:
            raise InvalidRequest("the upload is longer than its Content-Length")
        yield chunk
    if sent != size:
        raise InvalidRequest("the upload is shorter than its Content-Length")
    yield b"\0" * (-size % _BLOCK) + b"\0" * (2 * _BLOCK)


async def _file_chunks(f: IO[bytes]) -> AsyncIterator[bytes]:
    f.seek(0)
    while chunk := f.read(_CHUNK):
        yield chunk


async def _spooled(
    body: AsyncIterator[bytes], gzipped: bool
) -> tempfile.SpooledTemporaryFile[bytes]:
    # The caller closes it (a `with` there), once it has been sent.
    spool: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(_SPOOL)  # noqa: SIM115
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzipped else None
    async for chunk in body:
        spool.write(inflate.decompress(chunk) if inflate else chunk)
    if inflate:
        spool.write(inflate.flush())
    return spool


def _written(path: str) -> dict[str, Any]:
    return {"name": posixpath.basename(path), "type": "file", "path": path}


async def _push(
    svc: E2BService, request: Request, path: str, size: int, body: AsyncIterator[bytes]
) -> dict[str, Any]:
    t = await target(svc, request.headers.get)
    dest = box_path(path)
    folder, name = posixpath.split(dest)
    if not name:
        raise InvalidRequest(f"{path!r} names a folder, not a file")
    owner = _owner(t.user)
    await svc.boxes.push(t.box.id, folder, owner, _tar_one(name, size, owner, body), t.caller)
    return _written(dest)


@router.post("/sandbox/files", response_model=None)
async def upload(request: Request) -> list[dict[str, Any]] | JSONResponse:
    svc = _e2b(request)
    if any(key.startswith("x-metadata-") for key in request.headers):
        # File metadata (envd 0.6.2's xattrs) is not kept here: refused, not dropped.
        await target(svc, request.headers.get)
        return JSONResponse(
            {
                "code": 501,
                "message": "Paddock's envd does not support file metadata "
                "(X-Metadata-* headers of POST /files)",
                "error_code": "unsupported",
            },
            501,
        )
    path = request.query_params.get("path", "")
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        written = []
        async with request.form(max_files=1000) as form:
            for _, item in form.multi_items():
                if not isinstance(item, UploadFile):
                    continue
                # The SDK names each part by its path; one part may take `path` instead.
                where = item.filename or path
                size = item.size if item.size is not None else 0
                written.append(await _push(svc, request, where, size, _file_chunks(item.file)))
        return written
    if not path:
        raise InvalidRequest("an octet-stream upload needs ?path=")
    gzipped = request.headers.get("content-encoding", "").lower() == "gzip"
    length = request.headers.get("content-length", "")
    if length.isdigit() and not gzipped:
        return [await _push(svc, request, path, int(length), request.stream())]
    spool = await _spooled(request.stream(), gzipped)
    with spool:
        size = spool.tell()
        return [await _push(svc, request, path, size, _file_chunks(spool))]


async def _member(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The bytes of the first regular file in a tar stream, as they arrive. Headers are
    parsed by tarfile from exactly one block each; PAX and GNU long-name records are
    skipped by their declared size."""
    buf = bytearray()
    source = chunks.__aiter__()

    async def need(n: int) -> bool:
        while len(buf) < n:
            try:
                buf.extend(await source.__anext__())
            except StopAsyncIteration:
                return False
        return True

    while await need(_BLOCK):
        block = bytes(buf[:_BLOCK])
        del buf[:_BLOCK]
        if block == b"\0" * _BLOCK:
            return
        try:
            info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError:
            raise InvalidState("the box sent an archive that could not be read") from None
        padded = info.size + (-info.size % _BLOCK)
        if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
            left = info.size
            while left > 0:
                if not buf and not await need(1):
                    return
                piece = bytes(buf[:left])
                del buf[: len(piece)]
                left -= len(piece)
                yield piece
            return
        if info.type in (tarfile.DIRTYPE,):
            raise InvalidRequest("path is a directory, not a file")
        # A PAX header, a long name, a link: skip what it carries.
        if not await need(padded):
            return
        del buf[:padded]


@router.get("/sandbox/files")
async def download(request: Request) -> Response:
    svc = _e2b(request)
    t = await target(svc, request.headers.get, running=False)
    path = request.query_params.get("path", "")
    chunks, st = await svc.boxes.pull(t.box.id, path, t.caller)
    if st.get("type") == "dir":
        raise InvalidRequest(f"{st['path']} is a directory, not a file")
    body = _member(chunks)
    # Read the first piece here, so a failure is still an error status, not a cut stream.
    try:
        first = await body.__anext__()
    except StopAsyncIteration:
        first = b""
    except PaddockError:
        raise

    async def rest() -> AsyncIterator[bytes]:
        yield first
        async for piece in body:
            yield piece

    headers = {"content-length": str(st["size"])} if isinstance(st.get("size"), int) else {}
    return StreamingResponse(rest(), media_type="application/octet-stream", headers=headers)


@router.get("/sandbox/health")
async def health(request: Request) -> Response:
    await target(_e2b(request), request.headers.get)
    return Response(status_code=204)
