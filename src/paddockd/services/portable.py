"""Portable boxes: a box (or one of its snapshots) written out as one file, and a file
made a new box, here or on another Paddock server (the format: box_archive.py).

An export reads a copy of the box's disk (a snapshot's, or one taken for it under the
same short freeze as a live snapshot), so the box keeps running. An import admits the
new box (name, capacity, the caller's limits, the engine's disk) before it reads any of
the disk, writes the disk aside, and makes the box only once the file proved whole and
its disk a clean filesystem: a refused file leaves nothing behind.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from .. import __version__
from ..domain.accounts import User
from ..domain.box import Box, validate_name
from ..domain.errors import CapacityExceeded, Conflict, InvalidRequest, InvalidState
from ..domain.network import NetworkPolicy, policy
from ..runtime.base import DiskSink, DiskSource, Runtime
from . import box_archive
from .box_archive import BadArchive, Manifest
from .boxes import BoxService
from .reconciler import Reconciler
from .snapshots import SnapshotService

_HEADER_BYTES = 1 << 20  # the most of the file read before its manifest is checked
# An import holds a worker thread while its client sends: a few at a time, from threads
# of their own, so that slow uploads never take the threads every engine call needs.
IMPORTS_AT_ONCE = 2


_T = TypeVar("_T")


@dataclass(frozen=True)
class Export:
    manifest: Manifest
    chunks: AsyncIterator[bytes]

    @property
    def filename(self) -> str:
        suffix = f"-{self.manifest.snapshot}" if self.manifest.snapshot is not None else ""
        return f"{self.manifest.name}{suffix}.paddock"


class PortableService:
    def __init__(
        self,
        runtime: Runtime,
        reconciler: Reconciler,
        boxes: BoxService,
        snapshots: SnapshotService,
        image: str,
    ) -> None:
        self._rt = runtime
        self._reconciler = reconciler
        self._boxes = boxes
        self._snapshots = snapshots
        self._image = image
        self._importing = 0
        self._threads: anyio.CapacityLimiter | None = None  # made in the event loop

    async def _check_copies(self) -> None:
        if not await self._rt.copies_disks():
            raise InvalidState(
                "this server keeps boxes' files as engine commits, not disk copies (see "
                "`paddock status`): boxes cannot be exported or imported here"
            )

    async def export(self, ref: str, snap_ref: str | None, caller: User | None = None) -> Export:
        """The box's files now (or snapshot `snap_ref`'s), as a box file to stream."""
        box = await self._boxes.resolve(ref, caller)
        await self._check_copies()
        if snap_ref is not None:
            snap = await self._snapshots.find(box, snap_ref)
            if snap.disk is None:
                raise InvalidState(
                    f"snapshot {snap.seq} of {box.name} is an engine commit (taken before "
                    "this server copied disks): export the box or a newer snapshot"
                )
            base, source = snap.image, await self._rt.open_disk(snap.disk)
        else:
            saved = await self._reconciler.save_for_forks(box.id)
            if saved is None:
                raise InvalidState(f"box {box.name} has no disk of its own to export")
            base, key = saved
            try:
                # Open, the copy's bytes stay readable once its name is gone.
                source = await self._rt.open_disk(key)
            finally:
                await self._reconciler.drop_saved(key)
        info = await self._rt.info()
        manifest = Manifest(
            name=box.name,
            type=box.type,
            image=base,
            uid_base=info.userns_base or 0,
            disk_size=source.size,
            ttl=box.ttl,
            ttl_action=box.ttl_action.value,
            network={"mode": box.network.mode, "allow": list(box.network.allow)},
            drives=list(box.drives),
            agent=box.agent,
            idle_stop=box.idle_stop,
            keep=box.keep,
            snapshot=snap.seq if snap_ref is not None else None,
            paddock=__version__,
        )
        return Export(manifest, _stream(manifest, source))

    async def import_box(
        self,
        body: AsyncIterator[bytes],
        name: str | None,
        type_name: str | None,
        rebase: bool,
        caller: User | None = None,
    ) -> Box:
        """A new box of the caller's from a box file (see the module's doc)."""
        await self._check_copies()
        if self._importing >= IMPORTS_AT_ONCE:
            raise CapacityExceeded(
                f"the server is taking in {IMPORTS_AT_ONCE} boxes already; try again shortly"
            )
        self._importing += 1
        try:
            return await self._import(body, name, type_name, rebase, caller)
        finally:
            self._importing -= 1

    async def _import(
        self,
        body: AsyncIterator[bytes],
        name: str | None,
        type_name: str | None,
        rebase: bool,
        caller: User | None,
    ) -> Box:
        reader = _Body(body, _HEADER_BYTES)
        manifest, extract = await self._in_thread(box_archive.open_archive, reader.read)
        name = validate_name(name or manifest.name)
        box_type = self._boxes.type_named(type_name or manifest.type)
        if box_type.disk_mb and manifest.disk_size > box_type.disk_mb << 20:
            raise InvalidRequest(
                f"the box's disk is {manifest.disk_size >> 20} MiB, more than type "
                f"{box_type.name}'s {box_type.disk_mb} MiB: choose a larger type (--type)"
            )
        info = await self._rt.info()
        if manifest.uid_base != (info.userns_base or 0):
            raise Conflict(
                f"the box's files are owned from host uid {manifest.uid_base}, this server's "
                f"boxes from {info.userns_base or 0}: its files would have other owners here",
                code="owners_mismatch",
            )
        base = await self._base(manifest, rebase)
        network = _network(manifest)
        await self._boxes.admissible([name], box_type.name, caller, what="an imported box")
        reader.limit = manifest.disk_size + manifest.disk_size // 32 + (16 << 20)
        key = f"imports/{secrets.token_hex(8)}"
        self._reconciler.committing.add(key)  # the sweep leaves it be
        try:
            sink = await self._rt.new_disk(key, manifest.disk_size)
            await self._in_thread(_write, extract, sink)
            return await self._boxes.create(
                name,
                box_type.name,
                manifest.ttl,
                manifest.ttl_action,
                manifest.drives,
                image=base,
                network=network,
                agent=manifest.agent,
                caller=caller,
                idle_stop=manifest.idle_stop,
                disk=key,
                keep=manifest.keep,
            )
        finally:
            await self._rt.drop_disk(key)
            self._reconciler.committing.discard(key)

    async def _in_thread(self, work: Callable[..., _T], *args: object) -> _T:
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(IMPORTS_AT_ONCE)
        return await anyio.to_thread.run_sync(work, *args, limiter=self._threads)

    async def _base(self, manifest: Manifest, rebase: bool) -> str:
        """The image the new box's disk lies over: the one it was made over, or with
        `rebase`, this server's box image."""
        if await self._rt.image_exists(manifest.image):
            return manifest.image
        if rebase:
            current = await self._rt.image_id(self._image)
            if current is None:
                raise InvalidState(f"this server has no box image {self._image} yet")
            return current
        raise Conflict(
            f"the box was made over image {manifest.image[:19]}, which this server does not "
            "have; `--rebase` puts its files over this server's box image (sound between "
            f"servers of the same Paddock version; it was written by {manifest.paddock})",
            code="image_mismatch",
        )


def _network(manifest: Manifest) -> NetworkPolicy:
    try:
        mode = str(manifest.network.get("mode", "allow-all"))
        return policy(mode, [str(t) for t in manifest.network.get("allow", [])])
    except (AttributeError, TypeError) as exc:
        raise BadArchive("its network policy is not one") from exc


def _write(extract: Callable[[DiskSink], None], sink: DiskSink) -> None:
    try:
        extract(sink)
        sink.commit()
    except ValueError as exc:  # the sink's: data past the disk's end, not a filesystem
        sink.abort()
        raise BadArchive(str(exc)) from exc
    except BaseException:
        sink.abort()
        raise


async def _stream(manifest: Manifest, source: DiskSource) -> AsyncIterator[bytes]:
    pieces = box_archive.write(manifest, source)
    try:
        while (piece := await anyio.to_thread.run_sync(next, pieces, None)) is not None:
            yield piece
    finally:
        source.close()


class _Body:
    """A request body read as a blocking `read(n)` from a worker thread, no more than
    `limit` bytes of it (so a file that never ends, or pads itself out, is cut off)."""

    def __init__(self, chunks: AsyncIterator[bytes], limit: int) -> None:
        self._chunks = chunks
        self._buffer = b""
        self._read = 0
        self.limit = limit

    def read(self, n: int = -1) -> bytes:
        if not self._buffer:
            self._buffer = anyio.from_thread.run(self._next)
        size = len(self._buffer) if n < 0 else n
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    async def _next(self) -> bytes:
        chunk = b""
        while not chunk:  # an empty piece is not the end
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                return b""
        self._read += len(chunk)
        if self._read > self.limit:
            raise BadArchive("it is larger than its disk could make it")
        return bytes(chunk)
