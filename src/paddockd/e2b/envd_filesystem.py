"""envd's `filesystem` service over Connect. Each call is one short command in the box, run
as the requested user (so the box's own permissions decide), through BoxService.run; a watch
is one long-running command (watching.py). The box's output is untrusted: listings come
NUL-separated from GNU find (a name cannot hold a NUL), are parsed field by field, and
anything malformed is dropped, never guessed at."""

from __future__ import annotations

import asyncio
import posixpath
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from connectrpc.request import RequestContext
from e2b.envd.filesystem import filesystem_connect
from e2b.envd.filesystem import filesystem_pb as pb
from protobuf import Oneof
from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

from ..domain.errors import Conflict, InvalidRequest, NotFound, PaddockError
from ..runtime.base import ExecProcess
from ..services.boxes import box_path
from .envd import Target, connect_error, keepalive, target
from .service import E2BService
from .watching import Watch, start_watch

# type (of the link itself), type of its target, size, symbolic mode, octal mode, owner,
# group, mtime, link target, path.
_FMT = r"%y\0%Y\0%s\0%M\0%m\0%u\0%g\0%T@\0%l\0%p\0"
_FIELDS = 10
_STAT = '[ -e "$1" ] || [ -L "$1" ] || exit 3; exec find "$1" -maxdepth 0 -printf "$2"'
_LIST = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4; '
    'find "$1" -mindepth 1 -maxdepth "$3" -printf "$2" 2>/dev/null; exit 0'
)
_MKDIR = '[ -e "$1" ] || [ -L "$1" ] && exit 5; mkdir -p -- "$1"'
_MOVE = (
    '[ -e "$1" ] || [ -L "$1" ] || exit 3; mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2"'
)
_REMOVE = '[ -e "$1" ] || [ -L "$1" ] || exit 3; rm -rf -- "$1"'
_TYPES = {"f": pb.FileType.FILE, "d": pb.FileType.DIRECTORY, "l": pb.FileType.SYMLINK}
_MAX_WATCHERS = 64


def _timestamp(mtime: str) -> Timestamp | None:
    try:
        seconds = float(mtime)
    except ValueError:
        return None
    whole = int(seconds)
    return Timestamp(seconds=whole, nanos=int((seconds - whole) * 1e9))


def parse_entries(out: str) -> list[pb.EntryInfo]:
    fields = out.split("\0")
    entries = []
    for i in range(0, len(fields) - _FIELDS + 1, _FIELDS):
        kind, target_kind, size, perms, mode, owner, group, mtime, link, path = fields[
            i : i + _FIELDS
        ]
        if not path.startswith("/") or not size.isdigit():
            continue
        is_link = kind == "l"
        resolved = target_kind if is_link and target_kind in ("f", "d") else kind
        try:
            octal = int(mode, 8)
        except ValueError:
            octal = 0
        entries.append(
            pb.EntryInfo(
                name=posixpath.basename(path) or path,
                type=_TYPES.get(resolved, pb.FileType.UNSPECIFIED),
                path=path,
                size=int(size),
                mode=octal,
                permissions=perms,
                owner=owner,
                group=group,
                modified_time=_timestamp(mtime),
                symlink_target=link if is_link else None,
                is_symlink=is_link,
            )
        )
    return entries


@dataclass(frozen=True)
class _Watcher:
    box_id: str
    watch: Watch


class FilesystemService(filesystem_connect.Filesystem):
    """Implements e2b's generated `filesystem_connect.Filesystem` protocol."""

    def __init__(self, e2b: E2BService) -> None:
        self._e2b = e2b
        self._watchers: dict[str, _Watcher] = {}

    async def _target(self, ctx: RequestContext) -> Target:  # type: ignore[type-arg]
        try:
            return await target(self._e2b, ctx.request_headers.get)
        except PaddockError as exc:
            raise connect_error(exc) from None

    async def _sh(self, t: Target, script: str, *args: str) -> str:
        code, out, err = await self._e2b.boxes.run(
            t.box.id, ["sh", "-c", script, "sh", *args], user=t.user, workdir="/", caller=t.caller
        )
        if code == 3:
            raise NotFound(f"no such file or directory: {args[0]}")
        if code == 4:
            raise InvalidRequest(f"not a directory: {args[0]}")
        if code == 5:
            raise Conflict(f"already exists: {args[0]}")
        if code != 0:
            raise InvalidRequest(err.strip()[-500:] or f"the operation failed ({code})")
        return out

    async def _stat(self, t: Target, path: str) -> pb.EntryInfo:
        entries = parse_entries(await self._sh(t, _STAT, path, _FMT))
        if not entries:
            raise NotFound(f"no such file or directory: {path}")
        return entries[0]

    async def stat(self, request: pb.StatRequest, ctx: RequestContext) -> pb.StatResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        try:
            return pb.StatResponse(entry=await self._stat(t, box_path(request.path)))
        except PaddockError as exc:
            raise connect_error(exc) from None

    async def list_dir(
        self,
        request: pb.ListDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.ListDirResponse:
        t = await self._target(ctx)
        depth = max(1, min(int(request.depth or 1), 64))
        try:
            out = await self._sh(t, _LIST, box_path(request.path), _FMT, str(depth))
        except PaddockError as exc:
            raise connect_error(exc) from None
        return pb.ListDirResponse(entries=parse_entries(out))

    async def make_dir(
        self,
        request: pb.MakeDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.MakeDirResponse:
        t = await self._target(ctx)
        try:
            path = box_path(request.path)
            await self._sh(t, _MKDIR, path)
            return pb.MakeDirResponse(entry=await self._stat(t, path))
        except PaddockError as exc:
            raise connect_error(exc) from None

    async def move(self, request: pb.MoveRequest, ctx: RequestContext) -> pb.MoveResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        try:
            dest = box_path(request.destination)
            await self._sh(t, _MOVE, box_path(request.source), dest)
            return pb.MoveResponse(entry=await self._stat(t, dest))
        except PaddockError as exc:
            raise connect_error(exc) from None

    async def remove(self, request: pb.RemoveRequest, ctx: RequestContext) -> pb.RemoveResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        try:
            await self._sh(t, _REMOVE, box_path(request.path))
        except PaddockError as exc:
            raise connect_error(exc) from None
        return pb.RemoveResponse()

    # -- watching (watching.py): inotify in the box, or polling where it cannot be had
    async def _watch(self, t: Target, path: str, recursive: bool, include_entry: bool) -> Watch:
        async def start(argv: list[str]) -> ExecProcess:
            # A watch waits for others' changes: it keeps no box from its idle stop.
            return await self._e2b.boxes.exec(
                t.box.id, argv, {}, "/", t.user, stdin=True, caller=t.caller, busy=False
            )

        async def sh(script: str, *args: str) -> str:
            return await self._sh(t, script, *args)

        return await start_watch(start, sh, parse_entries, box_path(path), recursive, include_entry)

    async def watch_dir(
        self,
        request: pb.WatchDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.WatchDirResponse]:
        t = await self._target(ctx)
        try:
            w = await self._watch(t, request.path, request.recursive, request.include_entry)
        except PaddockError as exc:
            raise connect_error(exc) from None
        try:
            started: Oneof[Literal["start"], pb.WatchDirResponse.StartEvent]
            started = Oneof("start", pb.WatchDirResponse.StartEvent())
            yield pb.WatchDirResponse(event=started)
            async for change in w.events(keepalive(ctx.request_headers.get)):
                if change is None:
                    alive: Oneof[Literal["keepalive"], pb.WatchDirResponse.KeepAlive]
                    alive = Oneof("keepalive", pb.WatchDirResponse.KeepAlive())
                    yield pb.WatchDirResponse(event=alive)
                    continue
                event: Oneof[Literal["filesystem"], pb.FilesystemEvent]
                event = Oneof("filesystem", change)
                yield pb.WatchDirResponse(event=event)
        except PaddockError as exc:
            raise connect_error(exc) from None
        finally:
            # The client went (or the box did): the watcher in the box goes too.
            await asyncio.shield(w.close())

    async def create_watcher(
        self,
        request: pb.CreateWatcherRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.CreateWatcherResponse:
        t = await self._target(ctx)
        # Watchers whose box stopped or went (their process ended with it) are forgotten.
        for key in [k for k, w in self._watchers.items() if w.watch.ended]:
            await self._drop(key)
        mine = [k for k, w in self._watchers.items() if w.box_id == t.box.id]
        if len(mine) >= _MAX_WATCHERS:
            # The oldest goes: a client that never removes its watchers cannot pile them up.
            await self._drop(mine[0])
        try:
            w = await self._watch(t, request.path, request.recursive, request.include_entry)
        except PaddockError as exc:
            raise connect_error(exc) from None
        watcher_id = secrets.token_hex(8)
        self._watchers[watcher_id] = _Watcher(t.box.id, w)
        return pb.CreateWatcherResponse(watcher_id=watcher_id)

    def _own(self, t: Target, watcher_id: str) -> Watch:
        w = self._watchers.get(watcher_id)
        if w is None or w.box_id != t.box.id:
            raise NotFound(f"no watcher {watcher_id!r}")
        return w.watch

    async def _drop(self, watcher_id: str) -> None:
        w = self._watchers.pop(watcher_id, None)
        if w is not None:
            await w.watch.close()

    async def get_watcher_events(
        self,
        request: pb.GetWatcherEventsRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.GetWatcherEventsResponse:
        t = await self._target(ctx)
        try:
            w = self._own(t, request.watcher_id)
            return pb.GetWatcherEventsResponse(events=await w.drain())
        except PaddockError as exc:
            raise connect_error(exc) from None

    async def remove_watcher(
        self,
        request: pb.RemoveWatcherRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.RemoveWatcherResponse:
        t = await self._target(ctx)
        try:
            self._own(t, request.watcher_id)
        except PaddockError as exc:
            raise connect_error(exc) from None
        await self._drop(request.watcher_id)
        return pb.RemoveWatcherResponse()
