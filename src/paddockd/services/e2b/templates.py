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
import contextlib
import io
import re
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
from ...domain.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, Unauthorized
from ...domain.templates import Template, validate_template_name
from ...store.template_tags import MAX_TAGS, Tag, TemplateTagRepository
from ..spool import read_back, spool
from ..templates import MAX_CONTEXT, BuildOptions, Given, TemplateService
from .snapshots import parse_snapshot_id
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
    target: str = ""  # the Paddock template it builds
    tags: list[str] = field(default_factory=list)  # its tags (the default one left out)
    # One upload at a time: the budget each is given is what the others left.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def size(self) -> int:
        return sum(self.uploads.values())


DEFAULT_TAGS = frozenset({"default", "latest"})  # a name alone: its own build
_TAG_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,29}[a-z0-9])?$")


def check_tag(tag: str) -> str | None:
    """A tag as kept (None: the default one)."""
    if tag in DEFAULT_TAGS:
        return None
    if not _TAG_RE.match(tag):
        raise InvalidRequest(
            f"invalid template tag {tag!r}: 1-31 lowercase letters, digits and hyphens, "
            "starting and ending with a letter or digit (no dots: a tagged build is the "
            "template NAME-TAG here)"
        )
    return tag


def split_id(template_id: str) -> tuple[str, str | None]:
    """`NAME` or `NAME:TAG` as (name, tag); the default tag is None."""
    name, _, tag = template_id.partition(":")
    return validate_template_name(name), check_tag(tag) if tag else None


def built_as(name: str, tag: str | None) -> str:
    """The Paddock template a build made under `name:tag` is: `name`, or `name-tag`."""
    if tag is None:
        return name
    if len(name) + 1 + len(tag) > 40:
        raise InvalidRequest(f"{name}:{tag} is too long: name and tag are 39 characters at most")
    return validate_template_name(f"{name}-{tag}")


def template_name(template_id: str) -> str:
    """The Paddock template a build under this E2B id is."""
    return built_as(*split_id(template_id))


class E2BTemplates:
    def __init__(
        self,
        templates: TemplateService,
        root: Path,
        tags: TemplateTagRepository,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._templates = templates
        self._root = root
        self._tags = tags
        self._now = now
        self._pending: dict[str, Pending] = {}

    # -- asking for a build, and its files --------------------------------------------
    async def request(self, caller: User | None, name: str, tags: list[str]) -> Pending:
        """A build of `name` (or `name:tag`), with more tags for it once it starts. Its own
        tag is the name's, else the first one asked (none of them the default)."""
        base, own = split_id(name)
        asked = [check_tag(t) for t in dict.fromkeys(tags)]
        if own is None and asked and None not in asked:
            own = asked[0]
        target = built_as(base, own)
        others = sorted({t for t in asked if t is not None and t != own})
        kept = await self._live(caller, base)
        if len({t.tag for t, _ in kept} | {t for t in [own, *others] if t}) > MAX_TAGS:
            raise InvalidRequest(f"a template has at most {MAX_TAGS} tags")
        if own is not None:
            if parse_snapshot_id(f"{base}:{own}") is not None:
                raise InvalidRequest(f"{base}:{own} reads as a snapshot id: choose another tag")
            with contextlib.suppress(NotFound):
                there = await self._templates.find(target, caller)
                if not any(built.id == there.id for _, built in kept):
                    raise Conflict(
                        f"a template named {target} exists that is not a build of "
                        f"{base}:{own}: rename or delete it first"
                    )
        await self._forget_old()
        mine = [p for p in self._pending.values() if holder_of(p.caller) == holder_of(caller)]
        if len(mine) >= MAX_PENDING:
            raise InvalidRequest(
                f"{MAX_PENDING} template builds of yours wait to be started: start or drop one"
            )
        build_id = secrets.token_hex(16)
        folder = self._root / "e2b-uploads" / build_id
        await anyio.to_thread.run_sync(lambda: folder.mkdir(parents=True, mode=0o700))
        e2b_id = base if own is None else f"{base}:{own}"
        made = Pending(build_id, e2b_id, caller, secrets.token_urlsafe(24), folder, self._now())
        made.target, made.tags = target, [t for t in [own, *others] if t is not None]
        self._pending[build_id] = made
        return made

    def _build(self, caller: User | None, template_id: str, build_id: str | None) -> Pending:
        name = template_name(template_id)
        for p in self._pending.values():
            mine = holder_of(p.caller) == holder_of(caller)
            if mine and p.target == name and build_id in (None, p.build_id):
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
        given = spec.get("fromTemplate")
        if isinstance(given, str) and ":" in given:  # a tag names a build of its own
            spec = {**spec, "fromTemplate": (await self.find(caller, given)).name}
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
            built = await self._templates.build(
                p.target, read_back(context), options, Given(), p.caller
            )
            if p.tags:
                await self._tags.put(holder_of(p.caller), split_id(p.name)[0], p.tags, built.id)
            return built
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
        """The build `NAME` or `NAME:TAG` stands for."""
        name, tag = split_id(alias)
        if tag is None:
            return await self._templates.find(name, caller)
        for found, built in await self._live(caller, name):
            if found.tag == tag:
                return built
        raise NotFound(f"template {alias!r} not found (no such tag, or its build is gone)")

    async def _live(self, caller: User | None, name: str) -> list[tuple[Tag, Template]]:
        """The tags of the caller's `name` with the builds they stand for; those whose
        build is gone (rebuilt, deleted) are dropped."""
        holder = holder_of(caller)
        mine = {t.id: t for t in await self._templates.listed(caller) if t.owner_id == holder}
        tags = await self._tags.all(holder, name)
        gone = [t.template for t in tags if t.template not in mine]
        if gone:
            await self._tags.drop_templates(holder, gone)
        return [(t, mine[t.template]) for t in tags if t.template in mine]

    async def delete(self, caller: User | None, template_id: str) -> None:
        """The build the id stands for; for a name alone, its tagged builds too (as E2B
        deletes a template with all its builds)."""
        name, tag = split_id(template_id)
        built = await self.find(caller, template_id)
        builds = {built.id} | (
            {b.id for _, b in await self._live(caller, name)} if tag is None else set()
        )
        for build_id in builds:
            with contextlib.suppress(NotFound):
                await self._templates.delete_id(build_id, caller)
        await self._tags.drop_templates(holder_of(caller), sorted(builds))

    async def listed(self, caller: User | None) -> list[Template]:
        """The templates a caller may start sandboxes from: theirs, and those shared."""
        return await self._templates.listed(caller)

    # -- tags ---------------------------------------------------------------------------
    async def assign(self, caller: User | None, target: str, tags: list[str]) -> Template:
        """Point `tags` of the target's name at the build `target` stands for (a tag of
        the name's own build stands for that build: a rebuild leaves it standing for
        nothing)."""
        name, _ = split_id(target)
        kept = [check_tag(t) for t in dict.fromkeys(tags)]
        if not kept or None in kept:
            raise InvalidRequest(
                "give tags other than default/latest (those are the name's own build)"
            )
        built = await self.find(caller, target)
        if built.owner_id != holder_of(caller):
            raise NotFound(f"template {target!r} not found")
        for tag in kept:
            if parse_snapshot_id(f"{name}:{tag}") is not None:
                raise InvalidRequest(f"{name}:{tag} reads as a snapshot id: choose another tag")
        live = {t.tag for t, _ in await self._live(caller, name)}
        if len(live | {t for t in kept if t}) > MAX_TAGS:
            raise InvalidRequest(f"a template has at most {MAX_TAGS} tags")
        await self._tags.put(holder_of(caller), name, [t for t in kept if t], built.id)
        return built

    async def untag(self, caller: User | None, name: str, tags: list[str]) -> None:
        base, _ = split_id(name)
        kept = [check_tag(t) for t in dict.fromkeys(tags)]
        if None in kept:
            raise InvalidRequest("the default tag is the name's own build: delete it instead")
        if not await self._tags.delete(holder_of(caller), base, [t for t in kept if t]):
            raise NotFound(f"no such tag of template {base!r}")

    async def tags(
        self, caller: User | None, template_id: str
    ) -> list[tuple[str, Template, float]]:
        """(tag, its build, when tagged) of the template's name, `default` first."""
        name, _ = split_id(template_id)
        found: list[tuple[str, Template, float]] = []
        with contextlib.suppress(NotFound):
            own = await self._templates.find(name, caller)
            found.append(("default", own, own.created_at))
        found += [(t.tag, built, t.created_at) for t, built in await self._live(caller, name)]
        if not found:
            raise NotFound(f"template {name!r} not found")
        return found

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
