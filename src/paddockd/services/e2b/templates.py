"""E2B's template builds onto Paddock's templates: what the SDK's `Template.build` calls
(request a build, upload each COPY's files, start it, poll its status and logs) and
`Sandbox.create("name")` resolves. The template is built by TemplateService, exactly as
`paddock template build` builds one: the request's steps become a Dockerfile
(template_steps.py) and the uploads its context.

The SDK uploads each COPY's files to a URL the API hands out, without its API key, as it
would to a storage bucket: the URL names the build by an unguessable key of its own, which
stands for the caller who asked for the build. What one caller may keep waiting here is
bounded (builds, bytes, files), and a build not started within an hour is forgotten."""

from __future__ import annotations

import asyncio
import io
import secrets
import shutil
import tarfile
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio.to_thread

from ...domain.accounts import User, holder_of
from ...domain.errors import InvalidRequest, NotFound, PayloadTooLarge, Unauthorized
from ...domain.templates import Template, validate_template_name
from ..spool import read_back, spool
from ..templates import MAX_CONTEXT, BuildOptions, Given, TemplateService
from .template_steps import FILES_HASH, translate

MAX_PENDING = 8  # builds requested and not started, per caller
MAX_UPLOADS = 256  # files uploads per build
PENDING_FOR = 3600.0
MAX_MEMBERS = 200_000


@dataclass
class Pending:
    build_id: str
    name: str
    caller: User | None
    key: str  # in the upload URLs
    folder: Path
    created: float
    uploads: dict[str, int] = field(default_factory=dict)  # files hash -> bytes
    # One upload at a time: the budget each is given is what the others left.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def size(self) -> int:
        return sum(self.uploads.values())


def template_name(template_id: str) -> str:
    """A template's E2B id is its name; `name:tag` names its only build (tags are not kept)."""
    name, _, tag = template_id.partition(":")
    if tag not in ("", "default", "latest"):
        raise InvalidRequest(f"template tags are not supported here ({template_id!r})")
    return validate_template_name(name)


class E2BTemplates:
    def __init__(
        self, templates: TemplateService, root: Path, now: Callable[[], float] = time.time
    ) -> None:
        self._templates = templates
        self._root = root
        self._now = now
        self._pending: dict[str, Pending] = {}

    # -- asking for a build, and its files --------------------------------------------
    async def request(self, caller: User | None, name: str, tags: list[str]) -> Pending:
        name = template_name(name)
        if tags:
            raise InvalidRequest("template tags are not supported here: build under a name")
        await self._forget_old()
        mine = [p for p in self._pending.values() if holder_of(p.caller) == holder_of(caller)]
        if len(mine) >= MAX_PENDING:
            raise InvalidRequest(
                f"{MAX_PENDING} template builds of yours wait to be started: start or drop one"
            )
        build_id = secrets.token_hex(16)
        folder = self._root / "e2b-uploads" / build_id
        await anyio.to_thread.run_sync(lambda: folder.mkdir(parents=True, mode=0o700))
        made = Pending(build_id, name, caller, secrets.token_urlsafe(24), folder, self._now())
        self._pending[build_id] = made
        return made

    def _build(self, caller: User | None, template_id: str, build_id: str | None) -> Pending:
        name = template_name(template_id)
        for p in self._pending.values():
            mine = holder_of(p.caller) == holder_of(caller)
            if mine and p.name == name and build_id in (None, p.build_id):
                return p
        raise NotFound(f"no build of template {name!r} waits to be started")

    def upload_link(self, caller: User | None, template_id: str, files_hash: str) -> Pending:
        if not FILES_HASH.match(files_hash):
            raise InvalidRequest("a files hash is 64 hex digits")
        return self._build(caller, template_id, None)

    def uploader(self, key: str) -> Pending:
        """The build an upload URL's key names (it stands for its caller)."""
        for p in self._pending.values():
            if secrets.compare_digest(p.key, key):
                return p
        raise Unauthorized("the upload link is not valid (expired, or its build started)")

    async def receive(self, p: Pending, files_hash: str, chunks: AsyncIterator[bytes]) -> None:
        if not FILES_HASH.match(files_hash):
            raise InvalidRequest("a files hash is 64 hex digits")
        if files_hash not in p.uploads and len(p.uploads) >= MAX_UPLOADS:
            raise InvalidRequest(f"a build takes at most {MAX_UPLOADS} file uploads")
        self._templates.check_disk("a template's files")
        path = p.folder / f"{files_hash}.tar"
        too_large = f"a build's uploads are at most {MAX_CONTEXT >> 30} GiB in all"
        async with p.lock:
            if p.build_id not in self._pending:
                raise Unauthorized("the upload link is not valid (its build has started)")
            p.uploads.pop(files_hash, None)  # until it is all here
            p.uploads[files_hash] = await spool(chunks, path, MAX_CONTEXT - p.size, too_large)

    # -- the build ----------------------------------------------------------------------
    async def start(
        self, caller: User | None, template_id: str, build_id: str, spec: dict[str, Any]
    ) -> Template:
        p = self._build(caller, template_id, build_id)
        plan = translate(spec)
        async with p.lock:  # no upload is under way from here
            missing = [h for h in plan.files if h not in p.uploads]
            if missing:
                raise InvalidRequest(
                    f"a COPY step's files ({missing[0][:12]}...) were not uploaded"
                )
            self._pending.pop(p.build_id, None)  # its upload links end here
        try:
            context = p.folder / "context.tar"
            uploads = [p.folder / f"{h}.tar" for h in dict.fromkeys(plan.files)]
            await anyio.to_thread.run_sync(_merge, uploads, context)
            options = BuildOptions(text=plan.dockerfile, notes=plan.notes)
            return await self._templates.build(
                p.name, read_back(context), options, Given(), p.caller
            )
        finally:
            await anyio.to_thread.run_sync(shutil.rmtree, p.folder, True)

    async def status(
        self, caller: User | None, template_id: str, build_id: str, offset: int
    ) -> dict[str, Any]:
        """E2B's build status: the state, and the log's entries from `offset` (100 at most)."""
        name = template_name(template_id)
        waiting = next((p for p in self._pending.values() if p.build_id == build_id), None)
        if waiting is not None and holder_of(waiting.caller) == holder_of(caller):
            return _status(name, build_id, "waiting", [], None)
        t = await self._templates.find(name, caller)
        entries = []
        async for event in self._templates.follow(name, live=False, caller=caller):
            entries.append(_entry(event))
        state = {"building": "building", "ready": "ready"}.get(t.status, "error")
        reason = t.message if state == "error" else None
        return _status(name, build_id, state, entries[offset : offset + 100], reason)

    async def find(self, caller: User | None, alias: str) -> Template:
        return await self._templates.find(template_name(alias), caller)

    async def delete(self, caller: User | None, template_id: str) -> None:
        await self._templates.delete(template_name(template_id), caller)

    async def _forget_old(self) -> None:
        for p in list(self._pending.values()):
            if self._now() - p.created > PENDING_FOR:
                del self._pending[p.build_id]
                await anyio.to_thread.run_sync(shutil.rmtree, p.folder, True)


def _entry(event: dict[str, object]) -> dict[str, Any]:
    at = float(str(event.get("at") or time.time()))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"
    if "status" in event:
        level = "error" if event["status"] == "failed" else "info"
        return {"timestamp": stamp, "level": level, "message": str(event.get("message", ""))}
    return {"timestamp": stamp, "level": "info", "message": str(event.get("data", "")).rstrip("\n")}


def _status(
    name: str, build_id: str, state: str, entries: list[dict[str, Any]], reason: str | None
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "templateID": name,
        "buildID": build_id,
        "status": state,
        "logEntries": entries,
        "logs": [f"[{e['timestamp']}] {e['message']}" for e in entries],
    }
    if reason is not None:
        answer["reason"] = {"message": reason}
    return answer


def _merge(uploads: list[Path], out_path: Path) -> None:
    """One context tar of the uploads (each a tar, gzipped or not, as the SDK sent it):
    files, folders and links only, and no more than a context may hold once unpacked (a
    small gzip may inflate to far more). Names are checked where the context is read."""
    total, count = 0, 0
    with out_path.open("wb") as raw, tarfile.open(fileobj=raw, mode="w|") as out:
        for upload in uploads:
            try:
                with tarfile.open(upload, mode="r|*") as tar:
                    for member in tar:
                        count += 1
                        total += member.size if member.isfile() else 0
                        if count > MAX_MEMBERS or total > MAX_CONTEXT:
                            raise PayloadTooLarge(
                                f"the uploads hold over {MAX_CONTEXT >> 30} GiB or "
                                f"{MAX_MEMBERS} files"
                            )
                        if not (member.isfile() or member.isdir() or member.issym()):
                            continue
                        data: IO[bytes] | None = None
                        if member.isfile():
                            data = tar.extractfile(member)
                        out.addfile(member, data or io.BytesIO())
            except (tarfile.TarError, EOFError, zlib.error) as exc:
                raise InvalidRequest(f"an upload is not a tar archive ({exc})") from None
