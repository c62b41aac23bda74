"""envd's `filesystem` service over Connect. Each call is one file operation in the box, as
the requested user (so the box's own permissions decide), through BoxService's file calls
(runtime/inbox.py does them in the box); a watch is one long-running command (watching.py).
The box's answers are untrusted: records are checked field by field, and anything
malformed is dropped, never guessed at."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from connectrpc.request import RequestContext
from e2b.envd.filesystem import filesystem_connect
from e2b.envd.filesystem import filesystem_pb as pb
from protobuf import Oneof
from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

from ...domain.errors import NotFound
from ...runtime import inbox
from ...runtime.base import ExecProcess, FileInfo
from ...services.boxes import box_path
from ...services.e2b.service import E2BService
from ...services.e2b.watching import Watch, start_watch
from .envd import Target, keepalive, target

_TYPES = {"file": pb.FileType.FILE, "dir": pb.FileType.DIRECTORY, "symlink": pb.FileType.SYMLINK}
_S_IFMT = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK}
_MAX_WATCHERS = 64
# A listing's entries at most (envd sets none; what paddockd holds of one is bounded).
MAX_LISTED = 50_000


def _timestamp(mtime: float) -> Timestamp:
    whole = int(mtime)
    return Timestamp(seconds=whole, nanos=int((mtime - whole) * 1e9))


def entry_of(info: FileInfo) -> pb.EntryInfo:
    """envd's entry for a path: a link's type is what it leads to, as envd says it."""
    resolved = info.leads_to if info.kind == "symlink" else info.kind
    is_link = info.kind == "symlink"
    return pb.EntryInfo(
        name=info.name,
        type=_TYPES.get(str(resolved), pb.FileType.UNSPECIFIED),
        path=info.path,
        size=info.size,
        mode=info.mode,
        permissions=stat.filemode(_S_IFMT.get(info.kind, 0) | info.mode),
        owner=info.owner,
        group=info.group,
        modified_time=_timestamp(info.mtime),
        symlink_target=_target_of(info) if is_link else None,
        is_symlink=is_link,
    )


def _target_of(info: FileInfo) -> str:
    """Where a link leads, as envd says it: a full path (resolved in the box where the
    box said; else the link's text taken from its folder)."""
    if info.resolved:
        return info.resolved
    return posixpath.normpath(posixpath.join(posixpath.dirname(info.path), info.link))


def parse_entries(out: str) -> list[pb.EntryInfo]:
    """Entries from records of runtime/inbox.py's layout (the in-box watcher prints them)."""
    return [entry_of(i) for i in inbox.records(out.encode("utf-8", "surrogateescape"))]


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
        return await target(self._e2b, ctx.request_headers.get)

    async def _stat(self, t: Target, path: str) -> pb.EntryInfo:
        info = await self._e2b.boxes.file_info(t.box.id, path, t.user, t.caller)
        if info is None:
            raise NotFound(f"no such file or directory: {path}")
        return entry_of(info)

    async def stat(self, request: pb.StatRequest, ctx: RequestContext) -> pb.StatResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        return pb.StatResponse(entry=await self._stat(t, box_path(request.path)))

    async def list_dir(
        self,
        request: pb.ListDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.ListDirResponse:
        t = await self._target(ctx)
        depth = max(1, min(int(request.depth or 1), 64))
        found = await self._e2b.boxes.list_files(
            t.box.id, box_path(request.path), depth, MAX_LISTED, t.user, t.caller
        )
        # As envd walks: each folder's entries by name, a folder's contents after it.
        found.sort(key=lambda i: i.path.split("/"))
        return pb.ListDirResponse(entries=[entry_of(i) for i in found])

    async def make_dir(
        self,
        request: pb.MakeDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.MakeDirResponse:
        t = await self._target(ctx)
        path = box_path(request.path)
        await self._e2b.boxes.make_dir(t.box.id, path, t.user, t.caller)
        return pb.MakeDirResponse(entry=await self._stat(t, path))

    async def move(self, request: pb.MoveRequest, ctx: RequestContext) -> pb.MoveResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        dest = box_path(request.destination)
        await self._e2b.boxes.move_file(t.box.id, box_path(request.source), dest, t.user, t.caller)
        return pb.MoveResponse(entry=await self._stat(t, dest))

    async def remove(self, request: pb.RemoveRequest, ctx: RequestContext) -> pb.RemoveResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        with contextlib.suppress(NotFound):  # as envd: removing what is not there succeeds
            await self._e2b.boxes.remove_file(t.box.id, box_path(request.path), t.user, t.caller)
        return pb.RemoveResponse()

    # -- watching (watching.py): inotify in the box, or polling where it cannot be had
    async def _watch(self, t: Target, path: str, recursive: bool, include_entry: bool) -> Watch:
        async def start(argv: list[str]) -> ExecProcess:
            # A watch waits for others' changes: it keeps no box from its idle stop.
            return await self._e2b.boxes.exec(
                t.box.id, argv, {}, "/", t.user, stdin=True, caller=t.caller, busy=False
            )

        async def listed(folder: str, depth: int) -> list[FileInfo]:
            return await self._e2b.boxes.list_files(
                t.box.id, folder, depth, MAX_LISTED, t.user, t.caller
            )

        return await start_watch(
            start, listed, parse_entries, box_path(path), recursive, include_entry
        )

    async def watch_dir(
        self,
        request: pb.WatchDirRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.WatchDirResponse]:
        t = await self._target(ctx)
        w = await self._watch(t, request.path, request.recursive, request.include_entry)
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
        w = await self._watch(t, request.path, request.recursive, request.include_entry)
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
        w = self._own(t, request.watcher_id)
        return pb.GetWatcherEventsResponse(events=await w.drain())

    async def remove_watcher(
        self,
        request: pb.RemoveWatcherRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.RemoveWatcherResponse:
        t = await self._target(ctx)
        self._own(t, request.watcher_id)
        await self._drop(request.watcher_id)
        return pb.RemoveWatcherResponse()
