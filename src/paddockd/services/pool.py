"""The warm pool: boxes made before anyone asks for them, so a `new` gets one at once.

A pooled box is a started container with a box id of its own and no row in the store. So
no one sees it (not in any list, not anyone's, no reference resolves to it), no member's
limits count it, and it has no network at all: the bridge guard binds ports only to
boxes in the store, and drops what an unbound port sends. It does hold its type's CPU and
memory against the server's capacity.

The pool keeps boxes of box types (`[pool] types`) and of templates (`[pool] templates`:
the owner's or shared ones, by name; a copy of the template's disk as a box of it gets).
A `new` that a pooled box fits (its type, its template's disk or the box image as it is
now, the engine's runtime profile and /proc views; no drives, which are volumes fixed when
a container is made) claims it: BoxService writes the row with the container's id and
the reconciler gives the box its name (hostname, /etc/hostname, /etc/hosts) before the
`new` returns; its network policy, owner, TTL and provider keys live on the row, so they
are the claimed box's from the first moment (and a template's start command runs then). A
pooled box is claimed once and then is a box like any other; the pool makes a fresh one in
its place. It refills one box at a time, only once no user's create
or resume has run for `refill_delay` seconds, and only into room no box needs: a request
that needs the room takes it from the pool first.

Pooled containers carry the pool's labels (type, and the limits and profile they were made
under). A paddockd that starts adopts those still running that fit what it would make now,
and removes the rest; the reconciler leaves them to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from paddock.wire.models import PoolStatus, PoolTypeStatus

from ..domain.box import Box, BoxType, new_box_id
from ..domain.errors import PaddockError, StorageLow
from ..domain.templates import Template, Templates
from ..runtime.base import (
    LABEL_INSTANCE,
    LABEL_POOL,
    LABEL_POOL_KEY,
    ContainerInfo,
    Profile,
    Runtime,
)
from ..store.boxes import BoxRepository
from .capacity import Capacity
from .reconciler import Reconciler

log = logging.getLogger("paddockd.pool")
# How often a round looks at every container for pooled ones that stopped (the engine's
# restart, a crash); between, a ready box's container is looked up in the running view.
SWEEP_SECONDS = 300.0


@dataclass(frozen=True)
class Pooled:
    """A ready box of the pool."""

    box_id: str
    container_id: str
    type: str
    cpus: float
    memory_mb: int
    key: str  # the type's limits and the runtime profile it was made under (pool_key)
    image_id: str
    views: bool  # LXCFS's /proc views are bound in
    template: str = ""  # the template disk it has a copy of ("": the box image's files)


@dataclass(frozen=True)
class Slot:
    """What the pool keeps `size` ready boxes of: a type, of the box image or a template."""

    name: str  # the type's, or "template:NAME"
    box_type: BoxType
    size: int
    template: Template | None = None

    @property
    def disk(self) -> str:
        return (self.template.disk or "") if self.template else ""

    def holds(self, pooled: Pooled) -> bool:
        return pooled.type == self.box_type.name and pooled.template == self.disk


@dataclass(frozen=True)
class Engine:
    """What a container made now would be made with."""

    profile: Profile
    views: bool
    image_id: str | None  # None: no box image


def pool_key(box_type: BoxType, profile: Profile, template: str = "") -> str:
    """What a pooled container must share with a box made now, besides its image and
    views: its type's limits (a type can be redefined between two starts), profile, and
    the template disk it has a copy of."""
    t = box_type
    key = f"{t.cpus:g}/{t.memory_mb}/{t.pids}/{t.disk_mb}/{profile}"
    return f"{key}/{template}" if template else key


class WarmPool:
    def __init__(
        self,
        sizes: dict[str, int],
        max_boxes: int,
        types: dict[str, BoxType],
        image: str,
        *,
        repo: BoxRepository,
        runtime: Runtime,
        reconciler: Reconciler,
        capacity: Capacity,
        instance: str,
        now: Callable[[], datetime],
        refill_delay: float = 1.0,
        interval: float = 10.0,
        template_sizes: dict[str, int] | None = None,
        default_type: str = "",
    ) -> None:
        self._sizes = dict(sizes)
        self._template_sizes = {n: k for n, k in (template_sizes or {}).items() if k > 0}
        self._default_type = default_type
        # Templates to resolve `[pool] templates` (set by the composition root).
        self.templates: Templates | None = None
        self._max = max_boxes
        self._types = types
        self._image = image
        self._repo = repo
        self._rt = runtime
        self._reconciler = reconciler
        self._capacity = capacity
        self._instance = instance
        self._now = now
        self._delay = refill_delay
        self._interval = interval
        self._ready: dict[str, Pooled] = {}  # by box id, oldest first
        self._making: dict[str, Slot] = {}  # by box id
        self._cancelled: set[str] = set()  # being made, but a user's request took the room
        self._busy = 0  # users' creates and resumes under way
        self._last_user = float("-inf")  # when the last one ended (monotonic)
        self._failures = 0  # makes that failed in a row
        self._swept = float("-inf")  # when `_check` last listed every container
        self._template_slots: list[Slot] = []
        self._template_note: str | None = None
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.note: str | None = None  # why the pool is not full, for `paddock status`

    # -- what BoxService asks, under its admission lock ----------------------------------
    def held(self) -> tuple[float, int]:
        """CPUs and memory the pool holds (ready boxes and those being made)."""
        held = [(p.cpus, p.memory_mb) for p in self._ready.values()]
        held += [
            (s.box_type.cpus, s.box_type.memory_mb)
            for i, s in self._making.items()
            if i not in self._cancelled
        ]
        return sum(c for c, _ in held), sum(m for _, m in held)

    async def image_version(self, type_name: str, template: Template | None = None) -> str | None:
        """The id of the image a box of this type (and template) is made from, when one may
        be ready (else None, and no engine call): what `take` needs. Asked before the
        admission lock is taken."""
        disk = (template.disk or "") if template else ""
        if not any(p.type == type_name and p.template == disk for p in self._ready.values()):
            return None
        return await self._rt.image_id(template.image or self._image if template else self._image)

    def take(
        self, type_name: str, image_id: str | None, template: Template | None = None
    ) -> Pooled | None:
        """Claim the oldest ready box of this type (and template) made from this image, if
        there is one. It is the caller's from here on: its row must follow, or `drop` it."""
        disk = (template.disk or "") if template else ""
        for pooled in self._ready.values():
            fits = pooled.type == type_name and pooled.template == disk
            if fits and image_id and pooled.image_id == image_id:
                del self._ready[pooled.box_id]
                self._wake.set()
                return pooled
        return None

    def configure(
        self,
        sizes: dict[str, int],
        max_boxes: int,
        types: dict[str, BoxType],
        default_type: str,
        capacity: Capacity,
    ) -> None:
        """The owner changed the pool's sizes, the types or the capacity: the next round
        makes what is missing and gives up what is now too many."""
        self._sizes = dict(sizes)
        self._max = max_boxes
        self._types = types
        self._default_type = default_type
        self._capacity = capacity
        self._wake.set()

    def drop(self, pooled: Pooled) -> None:
        """Remove a taken box that could not be made anyone's."""
        self._discard(pooled.box_id)

    def make_room(self, boxes: list[Box]) -> None:
        """Give up pooled boxes until `boxes` (the store's, with the one being admitted)
        and the pool fit the capacity together: users' boxes come first."""
        while True:
            cpus, memory = self._capacity.left(boxes, self.held())
            if cpus >= -1e-9 and memory >= 0:
                return
            making = [i for i in self._making if i not in self._cancelled]
            if making:  # not ready yet: the least lost
                self._cancelled.add(making[-1])
            elif self._ready:
                newest = next(reversed(self._ready))
                del self._ready[newest]
                self._discard(newest)
            else:
                return

    @contextlib.asynccontextmanager
    async def user_work(self) -> AsyncIterator[None]:
        """Around a user's create or resume: the pool makes nothing meanwhile."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._last_user = time.monotonic()
            if self._wanted() is not None:
                self._wake.set()

    def status(self) -> PoolStatus:
        cpus, memory = self.held()
        making = [s for i, s in self._making.items() if i not in self._cancelled]
        return PoolStatus(
            max_boxes=self._max if self._sizes or self._template_sizes else 0,
            types=[
                PoolTypeStatus(
                    type=slot.name,
                    size=slot.size,
                    ready=sum(slot.holds(p) for p in self._ready.values()),
                    making=sum(s.name == slot.name for s in making),
                )
                for slot in self._slots
            ],
            cpus=cpus,
            memory_mb=memory,
            note=self.note,
        )

    # -- the background loop -------------------------------------------------------------
    async def run(self) -> None:
        """Adopt what an earlier paddockd left, then keep the pool full (until cancelled)."""
        await self._guarded(self.adopt())
        while True:
            self._wake.clear()
            # Woken by a claim: the round waits until the user's work is done (its first
            # command comes next, and a round asks the engine things).
            await self._quiet()
            await self._guarded(self.fill())
            # After failures, wait longer: an engine in trouble is not hammered.
            pause = min(self._interval * 2**self._failures, 300.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pause)

    async def drain(self) -> None:
        """Wait for removals under way (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _guarded(self, job: Coroutine[Any, Any, None]) -> None:
        try:
            await job
        except PaddockError as exc:
            self.note = exc.message
            log.error("warm pool: %s", exc.message)
        except Exception:
            log.exception("warm pool failed")

    async def _engine(self) -> Engine:
        info = await self._rt.info()
        return Engine(
            info.profile, await self._rt.views_available(), await self._rt.image_id(self._image)
        )

    def _fits(self, pooled: Pooled, engine: Engine) -> bool:
        box_type = self._types.get(pooled.type)
        if box_type is None or pooled.key != pool_key(box_type, engine.profile, pooled.template):
            return False
        if pooled.views != engine.views:
            return False
        if pooled.template:  # its template's disk as it is now (a rebuild replaces it)
            return any(s.holds(pooled) for s in self._slots)
        return pooled.image_id == engine.image_id

    @property
    def _slots(self) -> list[Slot]:
        types = [
            Slot(name, self._types[name], size)
            for name, size in self._sizes.items()
            if name in self._types
        ]
        return types + self._template_slots

    async def _resolve_templates(self) -> None:
        """The `[pool] templates` as they are now (a template built, rebuilt or gone)."""
        slots, missing = [], []
        for name, size in self._template_sizes.items():
            if self.templates is None:
                break
            try:
                t = await self.templates.for_box(name, None)
            except PaddockError as exc:
                missing.append(f"template {name}: {exc.message}")
                continue
            box_type = self._types.get(t.defaults.type or self._default_type)
            if box_type is not None:
                slots.append(Slot(f"template:{name}", box_type, size, t))
        self._template_slots = slots
        self._template_note = "; ".join(missing) or None

    def _wanted(self) -> Slot | None:
        """What to make a box of next, if the pool is short of one."""
        if len(self._ready) + len(self._making) >= self._max:
            return None
        for slot in self._slots:
            have = sum(slot.holds(p) for p in self._ready.values())
            have += sum(s.name == slot.name for s in self._making.values())
            if have < slot.size:
                return slot
        return None

    async def fill(self) -> None:
        """One round: replace what went out of date, then make what is missing."""
        await self._resolve_templates()
        await self._check()
        await self._refill()

    async def adopt(self) -> None:
        """Keep the pooled containers an earlier paddockd made that fit; remove the rest."""
        containers = await self._rt.containers({LABEL_INSTANCE: self._instance})
        pooled = [c for c in containers if c.labels.get(LABEL_POOL)]
        if not pooled:
            return
        engine = await self._engine()
        claimed = {b.id for b in await self._repo.all()}
        for info in pooled:
            if info.box_id in claimed:
                continue  # a box now: the reconciler's
            box_type = self._types.get(info.labels[LABEL_POOL])
            wanted = self._wanted()
            candidate = Pooled(
                info.box_id,
                info.id,
                info.labels[LABEL_POOL],
                box_type.cpus if box_type else 0.0,
                box_type.memory_mb if box_type else 0,
                info.labels.get(LABEL_POOL_KEY, ""),
                info.image_id,
                info.views,
            )
            # Only boxes of the box image (a template's has its disk in its key: no fit).
            if (
                info.running
                and wanted is not None
                and wanted.template is None
                and wanted.box_type == box_type
                and self._fits(candidate, engine)
            ):
                await self._warm(info.id)  # its agent may be an older paddockd's
                self._ready[info.box_id] = candidate
                log.info("adopted pooled box %s (%s)", info.box_id, wanted.name)
            else:
                self._discard(info.box_id)
        # What the boxes need comes first (a `new` may have been admitted meanwhile).
        self.make_room(await self._repo.all())

    async def _check(self) -> None:
        """Drop ready boxes that no longer fit a `new` (a rebuilt image, LXCFS back or
        gone, an engine restart) or whose container is gone; remove what an earlier drop
        left behind (every SWEEP_SECONDS: it takes a listing of every container, ~150 ms
        of the engine's and paddockd's at 500 boxes)."""
        now = time.monotonic()
        if now - self._swept >= SWEEP_SECONDS:
            self._swept = now
            await self._sweep(await self._rt.containers({LABEL_INSTANCE: self._instance}))
        if not self._ready:
            return
        engine = await self._engine()
        live = {c.box_id: c for c in await self._rt.running({LABEL_INSTANCE: self._instance})}
        for pooled in list(self._ready.values()):
            info = live.get(pooled.box_id)
            if info is not None and info.running and self._fits(pooled, engine):
                continue
            # Taken meanwhile: a claim's now, not ours to drop.
            if self._ready.pop(pooled.box_id, None) is not None:
                log.info("pooled box %s is out of date; replacing it", pooled.box_id)
                self._discard(pooled.box_id)
        self._trim()

    def _trim(self) -> None:
        """Give up the ready boxes beyond what the pool is now to keep (its sizes or its
        total made smaller), the newest first: the oldest are the readiest."""
        kept: dict[str, int] = {}
        sizes = {slot.name: slot.size for slot in self._slots}
        total = 0
        for pooled in list(self._ready.values()):
            slot = next((s for s in self._slots if s.holds(pooled)), None)
            name = slot.name if slot is not None else ""
            kept[name] = kept.get(name, 0) + 1
            total += 1
            if kept[name] > sizes.get(name, 0) or total > self._max:
                total -= 1
                del self._ready[pooled.box_id]
                log.info("pooled box %s is more than the pool keeps; removing it", pooled.box_id)
                self._discard(pooled.box_id)

    async def _refill(self) -> None:
        while self._wanted() is not None:
            await self._quiet()
            slot = self._wanted()  # claims may have moved it meanwhile
            if slot is None:
                break
            try:
                self._capacity.check_disk("the warm pool")
            except StorageLow as exc:
                self.note = exc.message
                return
            engine = await self._engine()
            if engine.image_id is None:
                self.note = f"no box image {self._image} yet (`paddock image build`)"
                return
            # Reserve first, then look at the boxes: a `new` admitted from here on sees
            # the reservation and takes it back if it needs the room; one admitted before
            # is in the rows read below.
            box_id = new_box_id()
            self._making[box_id] = slot
            try:
                self.make_room(await self._repo.all())
                if box_id in self._cancelled:
                    self.note = "the server has no room for more ready boxes"
                    return
                await self._make(box_id, slot, engine)
            finally:
                del self._making[box_id]
                self._cancelled.discard(box_id)
        self.note = self._template_note

    async def _quiet(self) -> None:
        """Return once no user's create or resume has run for `refill_delay` seconds."""
        while True:
            wait = self._last_user + self._delay - time.monotonic()
            if self._busy == 0 and wait <= 0:
                return
            await asyncio.sleep(max(wait, 0.1))

    async def _make(self, box_id: str, slot: Slot, engine: Engine) -> None:
        """Make the box reserved as `box_id`; ready unless its room was taken meanwhile."""
        box_type = slot.box_type
        key = pool_key(box_type, engine.profile, slot.disk)
        # Named by its id: the claim gives it its name. A template's box is made with a
        # copy of the template's disk, as a box of it is.
        t = slot.template
        image = (t.image or self._image) if t else self._image
        box = Box.of_type(box_id, box_id, box_type, image, self._now(), current_disk=t and t.disk)
        try:
            info = await self._reconciler.create_pooled(
                box, {LABEL_POOL: box_type.name, LABEL_POOL_KEY: key}
            )
        except PaddockError:
            self._failures += 1
            raise
        self._failures = 0
        if box_id in self._cancelled:
            self._discard(box_id)
            return
        await self._warm(info.id)
        self._ready[box_id] = Pooled(
            box_id,
            info.id,
            box_type.name,
            box_type.cpus,
            box_type.memory_mb,
            key,
            info.image_id,
            info.views,
            slot.disk,
        )

    async def _warm(self, cid: str) -> None:
        """The claim's first command as quick as the box's later ones (its exec agent)."""
        try:
            await self._rt.warm_exec(cid)
        except PaddockError as exc:  # its commands go by the engine, as any box's first
            log.info("pooled container %s: %s", cid[:12], exc.message)

    async def _sweep(self, containers: list[ContainerInfo]) -> None:
        """Pooled containers that ran and stopped, neither ready nor claimed, are ours to
        remove: a removal that failed (the engine was away) is tried again here, level-
        based, rather than leaving them for good. (One being made is never `exited`.)"""
        left = [
            c
            for c in containers
            if c.labels.get(LABEL_POOL) and c.status == "exited" and c.box_id not in self._ready
        ]
        if not left:
            return
        claimed = {b.id for b in await self._repo.all()}
        for info in left:
            if info.box_id not in claimed:
                self._discard(info.box_id)

    def _discard(self, box_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._remove(box_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _remove(self, box_id: str) -> None:
        try:
            await self._reconciler.discard_pooled(box_id)
        except PaddockError as exc:
            log.error("removing pooled box %s: %s", box_id, exc.message)
            self._swept = float("-inf")  # the next round's sweep tries again
        except Exception:
            log.exception("removing pooled box %s failed", box_id)
            self._swept = float("-inf")
