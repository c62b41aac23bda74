"""Box lifecycle and work inside boxes: the use cases behind every box route."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Protocol

from paddock.wire.models import CopyKind

from .. import faults
from ..config import Config
from ..domain.accounts import NO_LIMITS, Limits, Role, User, holder_of, sees
from ..domain.agents import check_agent
from ..domain.box import (
    Box,
    BoxState,
    BoxType,
    Desired,
    TtlAction,
    generated_name,
    new_box_id,
    validate_idle_stop,
    validate_keep,
    validate_name,
    validate_ttl,
)
from ..domain.errors import (
    Conflict,
    InvalidRequest,
    InvalidState,
    NotFound,
    PaddockError,
    PayloadTooLarge,
)
from ..domain.network import NetworkPolicy, closed_entry, policy
from ..domain.snapshot import drive_mount, parse_drive
from ..domain.templates import Template, Templates
from ..netpolicy.base import NetworkRules
from ..runtime import inbox
from ..runtime.base import ExecProcess, ExecSpec, ExecWrapper, FileInfo, Placement, Runtime
from ..store.boxes import BoxRepository
from .activity import Activity
from .capacity import Capacity, check_limits
from .drives import DriveService
from .pool import WarmPool
from .reconciler import Reconciler

HOME = "/config"
BOX_USER = "abc"
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$|^[0-9]{1,10}(:[0-9]{1,10})?$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# What paddockd holds of a command run to completion (`run`: exec with wait, the desktop's
# helpers): what a box prints is the box's to choose, what paddockd keeps in memory is not.
MAX_RUN_OUTPUT = 64 << 20
# A command running in a box, as `exec` hands it to the API's routes.
BoxProcess = ExecProcess


def in_background(cmd: list[str]) -> list[str]:
    """`cmd` started in the background in the box (`exec -d`): the exec ends at once with
    `PID LOG` on stdout."""
    return inbox.started(cmd)


# The engine's API (1.41) cannot size a TTY at creation, and its resize reaches the TTY only
# after the command has started: so paddockd resizes right after the start, and the command
# waits (up to 1 s) for that size before it runs. Setting the size here instead undid a
# resize sent at once after the start (seen: E2B's pty.create then resize gave 24x80).
_SIZED = (
    'i=0; while [ "$(stty size 2>/dev/null)" = "0 0" ] && [ "$i" -lt 100 ]; do '
    "sleep 0.01; i=$((i+1)); done; "
    '[ "$(stty size 2>/dev/null)" = "0 0" ] && stty cols "$1" rows "$2" 2>/dev/null; '
    'shift 2; exec "$@"'
)


async def _crashing_midway(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    # Only when a fault is armed: a pull's stream is otherwise passed through untouched.
    async for chunk in chunks:
        yield chunk
        faults.point("pull.streaming")


class BoxEnvironment(Protocol):
    """Keys and secrets in a box's commands' environment (services/gateway.py)."""

    async def env_for_box(self, box: Box) -> dict[str, str]: ...

    async def check_secrets(self, holder: str | None, names: list[str]) -> None: ...

    async def attach_secrets(self, box: Box, names: list[str], holder: str | None) -> None: ...


def box_path(path: str) -> str:
    """A path in the box: relative ones are under the box user's home."""
    if not path or "\x00" in path:
        raise InvalidRequest("a path in the box must be a non-empty string without NUL bytes")
    if len(path) > 4096:
        raise InvalidRequest("path is longer than 4096 characters")
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(HOME, path))


def _check_place(place: Placement) -> None:
    name = place.name
    if place.kind == "into":
        if name:
            raise InvalidRequest("a copy into a folder takes no name")
    elif not name or name in (".", "..") or "/" in name or "\0" in name:
        raise InvalidRequest(f"the copy's name must be one path component, not {name!r}")
    elif len(name.encode(errors="surrogateescape")) > 255:
        raise InvalidRequest("the copy's name is longer than 255 bytes")


def _described(path: str, st: FileInfo) -> dict[str, Any]:
    """The files API's stat of `path`: type, size, permission bits, the box's own owner
    ids, and a link's target (resolved in the box)."""
    kind = st.kind if st.kind != "other" else "file"
    described: dict[str, Any] = {
        "path": path,
        "exists": True,
        "type": kind,
        "size": st.size,
        "mode": st.mode,
        "uid": st.uid,
        "gid": st.gid,
    }
    if kind == "symlink":
        described["target"] = st.resolved or st.link
    return described


class BoxService:
    def __init__(
        self,
        cfg: Config,
        repo: BoxRepository,
        runtime: Runtime,
        reconciler: Reconciler,
        capacity: Capacity,
        now: Callable[[], datetime],
        drives: DriveService,
        limits_of: Callable[[str], Awaitable[Limits]] | None = None,
        activity: Activity | None = None,
        *,
        pool: WarmPool,
        network: NetworkRules | None = None,
    ) -> None:
        self._cfg = cfg
        self._net = network
        self._repo = repo
        self._rt = runtime
        self._reconciler = reconciler
        self.capacity = capacity
        self._now = now
        # Why a box is being stopped, where not by a user's call ("ttl", "idle"): told in
        # its box.stopped event, which takes it (services/box_events.py).
        self.stop_reasons: dict[str, str] = {}
        self._drives = drives
        # A member's limits, by user id (the owner has none).
        self._limits_of = limits_of
        # What uses each box, for the idle stop (the reaper reads it).
        self.activity = activity or Activity()
        self._pool = pool
        # Capacity is checked and claimed under one lock, so two concurrent `new`s can never
        # both take the last slot.
        self._claim = asyncio.Lock()
        # Extra environment for a box's commands (provider keys attached to it); set by the
        # composition root, since the credentials service itself resolves boxes here.
        self.environment: BoxEnvironment | None = None
        # Templates boxes are made from (services/templates.py); set by the composition
        # root likewise.
        self.templates: Templates | None = None

    def _templates(self) -> Templates:
        if self.templates is None:
            raise InvalidRequest("this server has no templates")
        return self.templates

    # -- reading ----------------------------------------------------------------------
    @property
    def default_network(self) -> NetworkPolicy:
        net = self._cfg.network
        return policy(net.default_mode, net.default_allow)

    @property
    def types(self) -> dict[str, BoxType]:
        return self._cfg.types

    def configure(self, cfg: Config, capacity: Capacity) -> None:
        """The owner changed a setting (services/settings.py): boxes made, resumed or
        stopped from now on follow it."""
        self._cfg = cfg
        self.capacity = capacity

    async def all(self) -> list[Box]:
        return await self._repo.all()

    @staticmethod
    def owner_of(box: Box, caller: User | None) -> User | None:
        """Who acts when `caller` acts on `box` in that box's name (a fork, a wake): the
        box's owner. The caller themselves when it is theirs; None (paddockd itself, as
        the owner) for a box of the owner's."""
        if box.owner_id is None:
            return None if caller is None or caller.is_owner else caller
        if caller is not None and caller.id == box.owner_id:
            return caller
        return User(box.owner_id, "", Role.MEMBER)

    async def get(self, box_id: str) -> Box | None:
        """A box by its exact id, whoever's it is (for paddockd's own use)."""
        return await self._repo.get(box_id)

    async def listed(self, caller: User | None = None) -> list[Box]:
        """The boxes a user sees: their own (the owner: all), not those whose deletion is
        finishing in the background."""
        return [
            b
            for b in await self._repo.all()
            if b.state != BoxState.DELETING and sees(caller, b.owner_id)
        ]

    async def resolve(self, ref: str, caller: User | None = None) -> Box:
        """The box `ref` names, among those `caller` may see (None: paddockd itself). Every
        use of a box goes through here, so another user's box is missing to a member,
        exactly as one that does not exist (never "forbidden": that would tell it exists)."""
        matches = [b for b in await self._repo.find(ref) if sees(caller, b.owner_id)]
        if not matches:
            raise NotFound(f"no box named or with id {ref!r} (see `paddock ls`)")
        if len(matches) > 1:
            names = ", ".join(sorted(b.name for b in matches))
            raise Conflict(f"{ref!r} matches several boxes ({names}); use more of the id or a name")
        return matches[0]

    async def visible(self, box_id: str, caller: User | None) -> bool:
        """Whether `caller` may see what belongs to this box (a run's record, say), even
        once the box is gone: then only the owner may."""
        if caller is None or caller.is_owner:
            return True
        box = await self._repo.get(box_id)
        return box is not None and sees(caller, box.owner_id)

    async def snapshot_count(self, box: Box) -> int:
        return len(await self._repo.snapshot_images(box.id))

    async def snapshot_counts(self) -> dict[str, int]:
        """Every box's number of snapshots (by id; a box without one is not named)."""
        return await self._repo.snapshot_counts()

    # -- lifecycle --------------------------------------------------------------------
    async def create(
        self,
        name: str | None,
        type_name: str | None,
        ttl: int | None,
        ttl_action: str | None,
        drives: list[str] | tuple[str, ...] = (),
        image: str | None = None,
        network: NetworkPolicy | None = None,
        agent: str | None = None,
        caller: User | None = None,
        idle_stop: int | None = None,
        disk: str | None = None,
        keep: int | None = None,
        secrets: Sequence[str] = (),
        template: str | Template | None = None,
    ) -> Box:
        """Admit a box (validation, capacity, name) and bring it up; `image` (and `disk`,
        a saved disk it gets a copy of) are for forks. It is `caller`'s box. `keep`: the
        stop snapshots it keeps (None: the server's retention); `secrets`: the caller's
        secrets attached to it; `template`: made from one (a name the caller may use),
        whose defaults fill in what is not given."""
        made_from: Template | None = None
        if template is not None:
            made_from = (
                template
                if isinstance(template, Template)
                else await self._templates().for_box(template, caller)
            )
            d = made_from.defaults
            type_name = type_name or d.type
            ttl = ttl if ttl is not None else d.ttl
            if network is None and d.network:
                network = policy(d.network, d.allow)
            drives = drives or d.drives
            idle_stop = idle_stop if idle_stop is not None else d.idle_stop
            image, disk = made_from.image, made_from.disk
        secrets = list(dict.fromkeys(secrets))
        if secrets and self.environment is not None:
            await self.environment.check_secrets(holder_of(caller), secrets)
        idle = validate_idle_stop(
            self._cfg.idle_stop if idle_stop is None else idle_stop, self._cfg.idle_stop_min
        )
        keep = validate_keep(keep, self._cfg.snapshot_limit)
        if network is not None:
            network = await self.reachable(network)
        box_type = self.type_named(type_name)
        type_name = box_type.name
        ttl = validate_ttl(self._cfg.default_ttl if ttl is None else ttl)
        action = TtlAction(ttl_action) if ttl_action else self._cfg.ttl_action
        mounts = tuple(dict.fromkeys(drives))
        if len({parse_drive(d)[0] for d in mounts}) != len(mounts):
            raise InvalidRequest("a drive can be mounted only once per box")
        if len({drive_mount(d)[2] for d in mounts}) != len(mounts):
            raise InvalidRequest("two drives cannot be mounted at one path")
        for spec in mounts:
            # The box is the caller's, so the drives are: a name another user has too
            # makes or finds the caller's own drive of that name, never theirs.
            await self._drives.ensure(parse_drive(spec)[0], holder_of(caller))
        # A pooled box fits a box without drives of the box image or a template (not a
        # fork's snapshot).
        pooled_image = (
            None
            if mounts or (image and made_from is None)
            else await self._pool.image_version(type_name, made_from)
        )
        now = self._now()
        async with self._claim:
            boxes = await self._repo.all()
            name = await self._admit(boxes, name, box_type, caller, "a new box")
            pooled = self._pool.take(type_name, pooled_image, made_from)
            box = Box(
                id=pooled.box_id if pooled else new_box_id(),
                name=name,
                type=box_type.name,
                image=image or self._cfg.image.name,
                state=BoxState.CREATING,
                desired=Desired.RUNNING,
                created_at=now,
                ttl=ttl,
                ttl_action=action,
                cpus=box_type.cpus,
                memory_mb=box_type.memory_mb,
                pids=box_type.pids,
                disk_mb=box_type.disk_mb,
                started_at=now,
                drives=mounts,
                network=network or self.default_network,
                agent=check_agent(agent),
                owner_id=caller.stored_id if caller else None,
                idle_stop=idle,
                keep=keep,
                # A claimed box's container is there already; the reconciler names it.
                container_id=pooled.container_id if pooled else None,
                template=made_from.id if made_from else None,
                env=made_from.env if made_from else (),
                user=made_from.user if made_from else None,
                workdir=made_from.workdir if made_from else None,
                start_cmd=made_from.start_cmd if made_from else None,
            )
            box = replace(box, expires_at=box.deadline_from(now))
            try:
                await self._repo.add(box)
            except BaseException:
                if pooled:
                    self._pool.drop(pooled)
                raise
            self._pool.make_room([*boxes, box])
        if pooled:
            faults.point("pool.claimed")
        try:
            if secrets and self.environment is not None:
                await self.environment.attach_secrets(box, secrets, holder_of(caller))
            if disk is not None:
                box = await self._reconciler.adopt(box, box.image, disk)
            async with self._pool.user_work():
                created = await self._reconciler.reconcile(box.id)
        except PaddockError:
            # Never leave a half-made box behind: undo, then report the original failure.
            current = await self._repo.get(box.id) or box
            await self._repo.update(current, desired=Desired.DELETED, state=BoxState.ERROR)
            with contextlib.suppress(PaddockError):
                await self._reconciler.reconcile(box.id)
            raise
        assert created is not None
        return created

    async def _want(self, ref: str, desired: Desired, caller: User | None = None) -> Box:
        box = await self.resolve(ref, caller)
        wanted = box.wants(desired)
        if desired == Desired.RUNNING:
            now = self._now()
            async with self._claim:
                others = [b for b in await self._repo.all() if b.id != box.id]
                want = self._type_of(box)
                self.capacity.check(
                    others, want, lambda: self._when_full(others, want, caller, box)
                )
                if box.owner_id:
                    owner = User(box.owner_id, "", Role.MEMBER)
                    await self._check_limits(owner, others, self._type_of(box), new=False)
                wanted = await self._repo.update(
                    box, desired=desired, started_at=now, expires_at=wanted.deadline_from(now)
                )
                self._pool.make_room([*others, wanted])
            faults.point("resume.wanted")
            async with self._pool.user_work():
                result = await self._reconciler.reconcile(box.id)
            return result if result is not None else wanted
        if wanted is not box:
            wanted = await self._repo.update(box, desired=desired)
        result = await self._reconciler.reconcile(box.id)
        return result if result is not None else wanted

    def type_named(self, type_name: str | None) -> BoxType:
        box_type = self._cfg.types.get(type_name or self._cfg.default_type)
        if box_type is None:
            known = ", ".join(sorted(self._cfg.types))
            raise NotFound(f"unknown box type {type_name!r}; known types: {known}")
        return box_type

    async def admissible(
        self,
        names: Sequence[str | None],
        type_name: str | None,
        caller: User | None,
        what: str | None = None,
    ) -> None:
        """Whether `create` would admit these boxes now, all together, asked before costly
        work (a fork's copy) so that a refusal leaves nothing behind. `create` asks again."""
        box_type = self.type_named(type_name)
        given = [n for n in names if n is not None]
        if len(set(given)) != len(given):
            raise InvalidRequest("the forks' names must differ from each other")
        boxes = await self._repo.all()
        what = what or ("a fork" if len(names) == 1 else f"{len(names)} forks")
        for i, name in enumerate(names):
            name = await self._admit(boxes, name, box_type, caller, what)
            boxes.append(_planned(f"planned{i}", name, box_type, caller))

    async def _admit(
        self, boxes: list[Box], name: str | None, box_type: BoxType, caller: User | None, what: str
    ) -> str:
        """The new box's name, once it is free and the box fits the server, the caller's
        limits and the engine's disk."""
        taken = {b.name for b in boxes}
        if name is None:
            name = next(n for n in iter(generated_name, None) if n not in taken)
        elif validate_name(name) in taken:
            raise Conflict(f"a box named {name!r} already exists")
        self.capacity.check(boxes, box_type, lambda: self._when_full(boxes, box_type, caller))
        await self._check_limits(caller, boxes, box_type, new=True)
        self.capacity.check_disk(what)
        return name

    def _when_full(
        self, boxes: list[Box], want: BoxType, caller: User | None, resuming: Box | None = None
    ) -> str:
        """What the caller can do about a full server: stop one of their own running
        boxes (named), or take a type that fits now, if there is one (not for a box being
        resumed: its type is its own)."""
        me = caller.stored_id if caller else None
        mine = [
            b.name
            for b in boxes
            # (Not the boxes `admissible` plans beside them, which have no image yet.)
            if b.desired == Desired.RUNNING and b.image and (caller is None or b.owner_id == me)
        ]
        fits = [
            t.name
            for t in sorted(self._cfg.types.values(), key=lambda t: (t.cpus, t.memory_mb))
            if t.name != want.name and self.capacity.fits(boxes, t)
        ]
        if mine:
            shown = ", ".join(mine[:5]) + (f" and {len(mine) - 5} more" if len(mine) > 5 else "")
            advice = f"Stop one of your running boxes ({shown}: `paddock stop NAME`)"
        else:
            advice = "None of the running boxes are yours: ask the server's owner to stop one"
        if fits and resuming is None:
            advice += f", or take a type that fits now (--type {' or '.join(fits)})"
        return advice + ". `paddock status` shows what the server holds."

    async def _check_limits(
        self, caller: User | None, boxes: list[Box], want: BoxType, new: bool
    ) -> None:
        if caller is None or not caller.id or self._limits_of is None:
            return
        limits = await self._limits_of(caller.id)
        if limits != NO_LIMITS:
            own = [b for b in boxes if b.owner_id == caller.id and b.desired != Desired.DELETED]
            check_limits(limits, own, want, new)

    def _type_of(self, box: Box) -> BoxType:
        return BoxType(box.type, box.cpus, box.memory_mb, box.pids, disk_mb=box.disk_mb)

    async def stop(self, ref: str, caller: User | None = None) -> Box:
        return await self._want(ref, Desired.STOPPED, caller)

    async def resume(self, ref: str, caller: User | None = None) -> Box:
        return await self._want(ref, Desired.RUNNING, caller)

    async def delete(self, ref: str, force: bool = False, caller: User | None = None) -> None:
        box = await self.resolve(ref, caller)
        if box.state == BoxState.RUNNING and not force:
            raise InvalidState(
                f"box {box.name} is running; stop it first or use --force "
                "(deleting throws away its files and snapshots)"
            )
        await self._want(box.id, Desired.DELETED)

    async def reachable(self, policy: NetworkPolicy) -> NetworkPolicy:
        """`policy`, refused when its allowlist reaches into what boxes may not: cloud
        metadata, non-public ranges and the host's own networks, save what the server's
        owner opened in its configuration (`[network] open_ranges`). Whoever asks: that a
        member's box could reach a namespace on the server was the finding."""
        if policy.mode != "allowlist" or not policy.ranges or self._net is None:
            return policy
        found = closed_entry(policy, await self._net.closed(), self._cfg.network.open_ranges)
        if found is None:
            return policy
        entry, closed = found
        opened = (
            ""
            if closed.what.startswith("a cloud")
            else (
                " An allowlist may name it only once the server's owner opens it in the server's "
                "configuration ([network] open_ranges in paddockd.toml)."
            )
        )
        raise InvalidRequest(
            f"{entry} reaches into {closed.cidr}, {closed.what}: boxes cannot be let in "
            f"there.{opened} For the public internet, use allow-all."
        )

    async def set_network(self, ref: str, policy: NetworkPolicy, caller: User | None = None) -> Box:
        """Change a box's egress policy; it applies at once to a running box."""
        policy = await self.reachable(policy)
        box = await self._repo.update(await self.resolve(ref, caller), network=policy)
        faults.point("network.saved")
        await self._reconciler.sync_box(box.id)
        return box

    async def extend(self, ref: str, ttl: int, caller: User | None = None) -> Box:
        box = await self.resolve(ref, caller)
        if validate_ttl(ttl) == 0:
            return await self._repo.update(box, ttl=0, expires_at=None)
        if box.desired == Desired.RUNNING:
            deadline = replace(box, ttl=ttl).deadline_from(self._now())
            return await self._repo.update(box, ttl=ttl, expires_at=deadline)
        return await self._repo.update(box, ttl=ttl)

    async def expire(self, box: Box) -> None:
        """Apply a box's TTL action (called by the reaper). A stopped box keeps the reason,
        so `show` can say why it stopped (a resume clears it)."""
        if box.ttl_action == TtlAction.DELETE:
            await self._want(box.id, Desired.DELETED)
            return
        when = self._now()
        self.stop_reasons[box.id] = "ttl"
        try:
            stopped = await self._want(box.id, Desired.STOPPED)
        except PaddockError:
            self.stop_reasons.pop(box.id, None)
            raise
        await self._repo.update(
            stopped, message=f"stopped by its TTL at {when:%Y-%m-%d %H:%M:%S} UTC"
        )

    async def logs(self, ref: str, tail: int = 0, caller: User | None = None) -> str:
        """What the box's init and services wrote (its container's log), or the last
        `tail` lines; kept while the box is stopped, started afresh by a restore."""
        box = await self.resolve(ref, caller)
        if box.container_id is None:
            return ""
        try:
            return await self._rt.logs(box.container_id, tail)
        except NotFound:  # the container is being rebuilt from a snapshot
            return ""

    # -- inside a box -----------------------------------------------------------------
    async def running(self, ref: str, caller: User | None = None) -> Box:
        """The box, if it is running; otherwise a clear error (with how to resume)."""
        return await self._running(ref, caller)

    async def run(
        self,
        ref: str,
        cmd: list[str],
        user: str | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        caller: User | None = None,
    ) -> tuple[int, str, str]:
        """Run a command to completion: (exit code, stdout, stderr)."""
        proc = await self.exec(ref, cmd, env or {}, workdir, user, caller=caller)
        try:
            out = await _gathered(proc, MAX_RUN_OUTPUT)
            if out is None:
                raise PayloadTooLarge(
                    f"the command printed more than {MAX_RUN_OUTPUT >> 20} MiB, more than a "
                    "command run to its end may: stream its output instead (exec without wait)"
                )
            code = await proc.wait()
        finally:
            await proc.close()
        return code, *(b"".join(out[k]).decode(errors="replace") for k in (1, 2))  # type: ignore[return-value]

    async def _running(self, ref: str, caller: User | None = None) -> Box:
        box = await self.resolve(ref, caller)
        if box.state != BoxState.RUNNING or box.container_id is None:
            hint = f"; run `paddock resume {box.name}`" if box.state == BoxState.STOPPED else ""
            raise InvalidState(f"box {box.name} is {box.state.value}{hint}")
        self.activity.touch(box.id)
        return box

    async def wake(self, ref: str, caller: User | None = None) -> Box:
        """The box, started first if it was stopped (an API call's `wake=true`)."""
        box = await self.resolve(ref, caller)
        if box.state == BoxState.STOPPED or box.desired == Desired.STOPPED:
            box = await self.resume(box.id, caller)
        return box

    async def exec(
        self,
        ref: str,
        cmd: list[str],
        env: dict[str, str],
        workdir: str | None,
        user: str | None,
        tty: bool = False,
        stdin: bool = False,
        size: tuple[int, int] | None = None,
        caller: User | None = None,
        busy: bool = True,
    ) -> ExecProcess:
        """Start a command in the box. While it runs the box is in use (no idle stop),
        unless `busy` is False: a watcher that only waits for changes is no use of the box."""
        if not cmd:
            raise InvalidRequest("no command given")
        for key, value in env.items():
            if not _ENV_KEY_RE.match(key) or "\x00" in value:
                raise InvalidRequest(f"invalid environment variable {key!r}")
        if user is not None and not _USER_RE.match(user):
            raise InvalidRequest(f"invalid user {user!r}")
        if any("\x00" in arg for arg in cmd):
            raise InvalidRequest("command arguments cannot contain NUL bytes")
        box = await self._running(ref, caller)
        # The container's own PADDOCK_BOX is the name it was made with: a pooled box's
        # was its id.
        base = {**dict(box.env), "PADDOCK_BOX": box.name}
        if self.environment is not None:
            base.update(await self.environment.env_for_box(box))
        env = {**base, **env}
        if tty and size:
            cols, rows = size
            cmd = ["/bin/sh", "-c", _SIZED, "sh", str(int(cols)), str(int(rows)), *cmd]
        spec = ExecSpec(
            cmd=cmd,
            env=env,
            workdir=box_path(workdir or box.workdir or HOME),
            user=user or box.user or BOX_USER,
            tty=tty,
            stdin=stdin,
        )
        assert box.container_id is not None
        proc = await self._rt.exec(box.container_id, spec)
        if tty and size:
            # Before the caller can send its own resize, so that one is the last (_SIZED).
            with contextlib.suppress(PaddockError):
                await proc.resize(int(size[0]), int(size[1]))
        return _InUse(proc, self.activity, box.id) if busy else proc

    async def copy(
        self,
        ref: str,
        dest: str,
        owner: tuple[int, int],
        kind: CopyKind,
        name: str,
        chunks: AsyncIterator[bytes],
        caller: User | None = None,
    ) -> tuple[str, int]:
        """A tar placed at `dest` by docker cp's rules, in the box (no look first): `kind`
        "file"/"dir" for one SRC named `name` on top of the tar, "into" for several or
        one's contents. Where it landed, and the bytes it took."""
        return await self.push(ref, dest, owner, chunks, caller, Placement(kind, name))

    async def push(
        self,
        ref: str,
        dest: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        caller: User | None = None,
        place: Placement | None = None,
    ) -> tuple[str, int]:
        """Unpack a tar into the folder `dest` (made when missing), or with `place` copy it
        to `dest` by docker cp's rules; where it landed, and the bytes it took."""
        box = await self._running(ref, caller)  # first: another's box is not found
        assert box.container_id is not None
        path = box_path(dest)
        if place is not None:
            _check_place(place)
            if dest.endswith("/") and path != "/":
                path += "/"  # by the copy's rules, a DEST ending in / names a folder
        total = 0

        async def counted() -> AsyncIterator[bytes]:
            nonlocal total
            async for chunk in chunks:
                total += len(chunk)
                yield chunk
                faults.point("push.streaming")

        # Each missing folder the box user's, so a push into a new folder under /config
        # leaves them owning all of it; existing folders are left as they are.
        landed = await self._rt.put_archive(box.container_id, path, owner, counted(), place)
        return landed, total

    # -- a running box's files, as one of its users (runtime/inbox.py does them) ----------
    async def _files_of(self, ref: str, user: str | None, caller: User | None) -> tuple[str, str]:
        if user is not None and not _USER_RE.match(user):
            raise InvalidRequest(f"invalid user {user!r}")
        box = await self._running(ref, caller)
        assert box.container_id is not None
        return box.container_id, user or BOX_USER

    async def file_info(
        self, ref: str, path: str, user: str | None = None, caller: User | None = None
    ) -> FileInfo | None:
        cid, who = await self._files_of(ref, user, caller)
        return await self._rt.stat_file(cid, box_path(path), who)

    async def list_files(
        self,
        ref: str,
        path: str,
        depth: int,
        limit: int,
        user: str | None = None,
        caller: User | None = None,
    ) -> list[FileInfo]:
        cid, who = await self._files_of(ref, user, caller)
        return await self._rt.list_files(cid, box_path(path), depth, limit, who)

    async def make_dir(
        self, ref: str, path: str, user: str | None = None, caller: User | None = None
    ) -> None:
        """A new folder (and those on the way), the user's; refused if `path` exists."""
        cid, who = await self._files_of(ref, user, caller)
        await self._rt.make_dirs(cid, box_path(path), None, who, new=True)

    async def move_file(
        self, ref: str, src: str, dest: str, user: str | None = None, caller: User | None = None
    ) -> None:
        cid, who = await self._files_of(ref, user, caller)
        await self._rt.move_file(cid, box_path(src), box_path(dest), who)

    async def remove_file(
        self, ref: str, path: str, user: str | None = None, caller: User | None = None
    ) -> None:
        cid, who = await self._files_of(ref, user, caller)
        await self._rt.remove_file(cid, box_path(path), who)

    async def signal(self, ref: str, name: str, sig: str, caller: User | None = None) -> None:
        """`sig` to the process started in the box under `name` (runtime/inbox.py's
        `noted`) and all it started."""
        box = await self._running(ref, caller)
        assert box.container_id is not None
        await self._rt.signal(box.container_id, name, sig)

    async def write_file(
        self,
        ref: str,
        path: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        caller: User | None = None,
    ) -> dict[str, Any]:
        """One file of any length into the running box, streamed (no size up front, nothing
        held on the host): what it fills is the box's own disk. Its stat once written."""
        if path.endswith("/"):
            raise InvalidRequest(f"{path!r} names a folder, not a file")
        path = box_path(path)
        box = await self._running(ref, caller)
        assert box.container_id is not None
        st = await self._rt.write_file(box.container_id, path, owner, chunks)
        return _described(path, st)

    async def pull(
        self, ref: str, src: str, caller: User | None = None
    ) -> tuple[AsyncIterator[bytes], dict[str, Any]]:
        """A tar stream of `src` and what `src` is (as `stat` describes it)."""
        box = await self.resolve(ref, caller)
        if box.container_id is None or box.state in (BoxState.CREATING, BoxState.DELETING):
            raise InvalidState(f"box {box.name} is {box.state.value}")
        src = box_path(src)
        try:
            chunks, st = await self._rt.get_archive(box.container_id, src)
        except NotFound:
            raise NotFound(f"no such file or directory in box {box.name}: {src}") from None
        return _crashing_midway(chunks) if faults.ARMED else chunks, _described(src, st)

    async def stat(self, ref: str, path: str, caller: User | None = None) -> dict[str, Any]:
        box = await self.resolve(ref, caller)
        if box.container_id is None:
            raise InvalidState(f"box {box.name} is {box.state.value}")
        path = box_path(path)
        st = await self._rt.stat_file(box.container_id, path)
        if st is None:
            return {"path": path, "exists": False, "type": None}
        return _described(path, st)


async def _gathered(proc: ExecProcess, limit: int) -> dict[int, list[bytes]] | None:
    """A command's output by stream (1, 2) until it ends; None, and the command killed, once
    it printed more than `limit` bytes."""
    out: dict[int, list[bytes]] = {1: [], 2: []}
    held = 0
    async for kind, data in proc.output():
        held += len(data)
        if held > limit:
            await proc.kill()
            return None
        out[kind].append(data)
    return out


class _InUse(ExecWrapper):
    """An exec that keeps its box in use (no idle stop) until it is closed: a long build
    run through `paddock exec` is use, however quiet."""

    def __init__(self, proc: ExecProcess, activity: Activity, box_id: str) -> None:
        super().__init__(proc)
        self._busy = activity.busy(box_id)
        self._busy.__enter__()
        self._open = True

    async def close(self) -> None:
        try:
            await self._proc.close()
        finally:
            if self._open:
                self._open = False
                self._busy.__exit__(None, None, None)


def _planned(box_id: str, name: str, box_type: BoxType, caller: User | None) -> Box:
    """A box `admissible` counts as made already, to admit the next one beside it (no
    image: `_when_full` names none of these)."""
    owner = caller.stored_id if caller else None
    return Box.of_type(box_id, name, box_type, "", datetime.now(timezone.utc), owner_id=owner)
