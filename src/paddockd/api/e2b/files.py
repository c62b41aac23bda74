"""envd's REST side: `/files` (upload, download) and `/health`. An upload streams into the
box file by file as it arrives (api/e2b/uploads.py, BoxService.write_file); a download is the
one member of a pull's tar stream (BoxService.pull), its bytes streamed."""

from __future__ import annotations

import contextlib
import posixpath
import tarfile
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from ...domain.errors import InvalidRequest, InvalidState, NotFound, PaddockError, Unauthorized
from ...services.e2b.service import E2BService
from . import uploads
from .envd import Target, named_user, target

router = APIRouter()
# Where the gateway sends `/files` at the server's root: E2B's SDK builds its signed links
# from E2B_SANDBOX_URL with urljoin, which drops the URL's path.
SIGNED = "/signed/files"
_BLOCK = 512


def _e2b(request: Request) -> E2BService:
    svc: E2BService = request.app.state.e2b
    return svc


def _owner(user: str) -> tuple[int, int]:
    return (0, 0) if user in ("root", "0") else (1000, 1000)


def _written(path: str) -> dict[str, Any]:
    return {"name": posixpath.basename(path), "type": "file", "path": path}


# An error answered mid-upload leaves the rest of the body unread, and then the server
# closes the connection: a client reusing it (the SDK does) fails with "connection reset".
# Up to this much more is read and dropped first, so the next request finds it open.
_DRAIN = 16 << 20


async def _drained(request: Request) -> None:
    seen = 0
    with contextlib.suppress(Exception):
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > _DRAIN:
                return


@router.post("/sandbox/files", response_model=None)
async def upload(request: Request) -> list[dict[str, Any]] | JSONResponse:
    try:
        return await _upload(request, await target(_e2b(request), request.headers.get))
    except PaddockError:
        await _drained(request)
        raise


@router.post(SIGNED, response_model=None)
async def signed_upload(request: Request) -> list[dict[str, Any]] | JSONResponse:
    """`files.upload_url`'s link: the signature stands for the key (envd_tokens.py). A
    link refused is answered before its body is read (nothing drained for anyone)."""
    t = await _signed(request, "write")
    try:
        t = Target(t.caller, await _e2b(request).boxes.running(t.box.id, t.caller), t.user)
        return await _upload(request, t)
    except PaddockError:
        await _drained(request)
        raise


async def _signed(request: Request, operation: str) -> Target:
    query = request.query_params
    signature = query.get("signature", "")
    if not signature:
        raise Unauthorized("a file link needs a signature (the SDK's download_url/upload_url)")
    try:
        expiration = int(query["signature_expiration"]) if "signature_expiration" in query else None
    except ValueError:
        raise InvalidRequest("signature_expiration is not a whole number") from None
    user = query.get("username", "")
    path = query.get("path", "")
    caller, box = await _e2b(request).signed(path, operation, user, signature, expiration)
    return Target(caller, box, named_user(user))


async def _upload(request: Request, t: Target) -> list[dict[str, Any]] | JSONResponse:
    svc = _e2b(request)
    if any(key.startswith("x-metadata-") for key in request.headers):
        # File metadata (envd 0.6.2's xattrs) is not kept here: refused, not dropped.
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
    owner = _owner(t.user)
    gzipped = request.headers.get("content-encoding", "").lower() == "gzip"
    body = uploads.inflated(request.stream(), gzipped)

    async def write(name: str | None, data: AsyncIterator[bytes]) -> dict[str, Any]:
        # The SDK names each part by its path; one part may take `path` instead.
        where = name or path
        if not where:
            raise InvalidRequest("a file to upload needs a path (?path= or the part's filename)")
        st = await svc.boxes.write_file(t.box.id, where, owner, data, t.caller)
        return _written(st["path"])

    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        return await uploads.each_file(body, uploads.boundary_of(kind), write)
    if not path:
        raise InvalidRequest("an octet-stream upload needs ?path=")
    return [await write(path, body)]


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


_KERNEL_FILES = ("/proc/", "/sys/")


@router.get("/sandbox/files")
async def download(request: Request) -> Response:
    return await _download(request, await target(_e2b(request), request.headers.get, False))


@router.get(SIGNED)
async def signed_download(request: Request) -> Response:
    """`files.download_url`'s link."""
    return await _download(request, await _signed(request, "read"))


async def _download(request: Request, t: Target) -> Response:
    svc = _e2b(request)
    path = request.query_params.get("path", "")
    chunks, st = await svc.boxes.pull(t.box.id, path, t.caller)
    if st.get("type") == "dir":
        raise InvalidRequest(f"{st['path']} is a directory, not a file")
    if st.get("size") == 0 and str(st.get("path", "")).startswith(_KERNEL_FILES):
        # /proc and /sys say 0 bytes and hold more: read as a program reads them (the
        # box's cat, as the user, bounded like any command's output).
        if (close := getattr(chunks, "aclose", None)) is not None:
            await close()
        code, out, err = await svc.boxes.run(
            t.box.id, ["cat", "--", str(st["path"])], t.user, caller=t.caller
        )
        if code != 0:
            raise InvalidRequest(err.strip() or f"{st['path']} could not be read")
        return Response(out.encode(), media_type="application/octet-stream")
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
    # As E2B's proxy answers for a paused or gone sandbox: 502, which the SDK's
    # `is_running()` reads as "not running".
    try:
        await target(_e2b(request), request.headers.get)
    except (InvalidState, NotFound) as exc:
        # "was not found" is what the SDK reads as a sandbox no longer running.
        sandbox = request.headers.get("e2b-sandbox-id", "")
        message = f"sandbox {sandbox} was not found ({exc.message})"
        body = {"code": 502, "message": message, "error_code": exc.code}
        return JSONResponse(body, status_code=502)
    return Response(status_code=204)
