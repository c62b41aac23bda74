"""E2B's sandboxes as Paddock's boxes: the control plane's use cases, each one a call to the
box services (a sandbox is a box, its id the box id), plus what E2B adds per box (template,
metadata, env vars) in its own table. No second implementation of boxes lives here."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from paddock.wire.keys import from_e2b_key

from ...config import Config
from ...domain.accounts import SERVER, Role, User, holder_of
from ...domain.box import Box, BoxState, BoxType, Desired
from ...domain.errors import InvalidRequest, NotFound, PaddockError, Unauthorized
from ...domain.header_rules import HeaderRule, parse_rules
from ...domain.network import NetworkPolicy, policy
from ...domain.snapshot import Snapshot
from ...store.sandboxes import SandboxExtras, SandboxRepository
from ...store.tokens import TokenRepository
from ..boxes import BoxService
from ..drives import DriveService
from ..stats import StatsService
from ..usage_history import Point, UsageHistory
from .envd_tokens import OPERATIONS, EnvdTokens
from .envd_tokens import PREFIX as ENVD_PREFIX
from .listing import Query, page
from .secrets import E2BSecrets
from .snapshots import SandboxSnapshots, parse_snapshot_id
from .templates import E2BTemplates
from .volumes import VolumeContent

# The envd version the SDK is told: the features it gates (stdin, default user, octet-stream
# uploads, recursive watch, entry info in watch events) are the ones served here. File
# metadata (xattrs, 0.6.2) is refused with a clear error, not claimed.
ENVD_VERSION = "0.6.4"
DEFAULT_TEMPLATE = "base"
DEFAULT_TIMEOUT = 300
CLIENT_ID = "paddock"
# An E2B sandbox without a timeout still needs an end time in listings.
_FOREVER = timedelta(days=30)
_MAX_METADATA = 64
MAX_FORKS = 20  # as E2B's API
_SETTLE_POLLS = 600  # a minute of 0.1 s looks for a stop or start under way to end


@dataclass(frozen=True)
class Sandbox:
    box: Box
    extras: SandboxExtras

    @property
    def state(self) -> str:
        stopped = self.box.state in (BoxState.STOPPED, BoxState.STOPPING)
        return "paused" if stopped or self.box.desired == Desired.STOPPED else "running"


def api_key(headers: Callable[[str], str | None]) -> str:
    """The Paddock token an E2B client sent: X-API-Key (the SDK's control plane),
    X-Access-Token (its envd calls), or a Bearer token; read back from E2B's key format
    (paddock/wire/keys.py), which older SDKs insist on."""
    key = headers("x-api-key") or headers("x-access-token") or ""
    if not key:
        scheme, _, token = (headers("authorization") or "").partition(" ")
        key = token if scheme.lower() == "bearer" else ""
    key = key.strip()
    return from_e2b_key(key)


def _owner_of(box: Box) -> User:
    """Who an envd token or a signed link acts as: the box's owner, as a member, so it
    reaches that user's boxes at most (SERVER for a box a server token made)."""
    return User(box.owner_id, "", Role.MEMBER) if box.owner_id else SERVER


def network_policy(
    allow_internet_access: bool | None, network: dict[str, Any] | None
) -> NetworkPolicy | None:
    """E2B's egress options as Paddock's policy; None keeps the server's default. Cloud
    metadata stays blocked whatever is asked: no policy can open it (domain/network.py)."""
    network = network or {}
    allow = [str(t) for t in network.get("allowOut") or []]
    deny = [str(t) for t in network.get("denyOut") or []]
    # `rules` are headers the credential gateway sets (secrets.py), not the policy's.
    unsupported = sorted(
        k for k in network if k not in ("allowOut", "denyOut", "allowPublicTraffic", "rules")
    )
    if unsupported:
        raise InvalidRequest(f"unsupported network options: {', '.join(unsupported)}")
    everything = {"0.0.0.0/0", "::/0"}
    if deny and not set(deny) <= everything:
        # Paddock's policy is an allowlist; a deny list of some hosts has no equivalent.
        raise InvalidRequest(
            "denyOut is supported only as 0.0.0.0/0 (deny all, with allowOut as exceptions)"
        )
    if allow:
        return policy("allowlist", allow)
    if deny or allow_internet_access is False:
        return policy("deny-all")
    if allow_internet_access is True:
        return policy("allow-all")
    return None


class E2BService:
    def __init__(
        self,
        cfg: Config,
        boxes: BoxService,
        stats: StatsService,
        tokens: TokenRepository,
        repo: SandboxRepository,
        snapshots: SandboxSnapshots,
        templates: E2BTemplates | None,
        now: Callable[[], datetime],
        envd: EnvdTokens,
        domain: Callable[[], str | None] = lambda: None,
        history: UsageHistory | None = None,
        drives: DriveService | None = None,
        secrets: E2BSecrets | None = None,
        rules_changed: Callable[[Box], Awaitable[None]] | None = None,
        volume_content: VolumeContent | None = None,
    ) -> None:
        self._cfg = cfg
        self._boxes = boxes
        self._stats = stats
        self._tokens = tokens
        self._repo = repo
        self._now = now
        self.snapshots = snapshots
        self.templates = templates
        self._envd = envd
        self.domain = domain
        self.history = history
        self._drives = drives
        self.secrets = secrets
        self._rules_changed = rules_changed
        self.volume_content = volume_content

    def configure(self, cfg: Config) -> None:
        """A changed setting (its types are E2B's templates by name)."""
        self._cfg = cfg

    @property
    def boxes(self) -> BoxService:
        return self._boxes

    def box_type(self, name: str | None) -> BoxType:
        """A box type by name, the server's default for None (or one no longer there)."""
        return self._cfg.types.get(name or "") or self._cfg.types[self._cfg.default_type]

    def templates_of(self) -> E2BTemplates:
        if self.templates is None:
            raise InvalidRequest("this server builds no templates")
        return self.templates

    async def delete_template(self, caller: User, template_id: str) -> None:
        """E2B deletes snapshots as templates: a snapshot id is one, else a template name."""
        if parse_snapshot_id(template_id) is not None:
            await self.snapshots.delete(caller, template_id)
        else:
            await self.templates_of().delete(caller, template_id)

    async def authenticate(self, key: str, sandbox_id: str | None = None) -> User:
        """Whose call this is: an API key's user, or, on an envd call to `sandbox_id`,
        that sandbox's owner for its envd access token (envd_tokens.py), good for that
        sandbox only."""
        if not key:
            raise Unauthorized("missing API key: set E2B_API_KEY to a Paddock token (pdk_...)")
        if key.startswith(ENVD_PREFIX):
            if sandbox_id and self._envd.opens(key, sandbox_id):
                with contextlib.suppress(NotFound):
                    box = await self._boxes.resolve(sandbox_id)
                    if box.id == sandbox_id:  # the id itself, never a name or a prefix
                        return _owner_of(box)
            raise Unauthorized("the envd access token is not this sandbox's")
        user = await self._tokens.verify(key)
        if user is None:
            raise Unauthorized("the API key was not accepted (wrong, or revoked)")
        return user

    def envd_token(self, sandbox_id: str) -> str:
        return self._envd.of(sandbox_id)

    def traffic_token(self, s: Sandbox) -> str | None:
        """What opens a private sandbox's ports (services/e2b/hosts.py); None when public."""
        return None if s.extras.public_traffic else self._envd.traffic(s.box.id)

    async def signed(
        self, path: str, operation: str, user: str, signature: str, expiration: int | None
    ) -> tuple[User, Box]:
        """The sandbox a signed file link is for, and its owner to act as: the link's
        signature is one only that sandbox's envd access token makes."""
        if operation not in OPERATIONS:
            raise InvalidRequest(f"operation must be one of {', '.join(OPERATIONS)}")
        if expiration is not None and expiration < self._now().timestamp():
            raise Unauthorized("the signed link has expired")
        boxes = {b.id: b for b in await self._boxes.all() if b.state != BoxState.DELETING}
        found = self._envd.signer(boxes, path, operation, user, signature, expiration)
        if found is None:
            raise Unauthorized("the link's signature is not valid")
        return _owner_of(boxes[found]), boxes[found]

    async def _template(
        self, caller: User, template: str
    ) -> tuple[str | None, str | None, str | None, str | None]:
        """(box type, image, saved disk, Paddock template) a template names: `base` is the
        server's default box, a box type's name that type, `BOX:SEQ` one of the caller's
        snapshots (its box's type; its disk, where snapshots are copies of one), another
        name a template of the caller's (or a shared one)."""
        if template == DEFAULT_TEMPLATE:
            return None, None, None, None
        if template in self._cfg.types:
            return template, None, None, None
        if parse_snapshot_id(template) is not None:
            box, snap = await self.snapshots.find(caller, template)
            return box.type, snap.image, snap.disk, None
        if self.templates is not None:
            with contextlib.suppress(NotFound, InvalidRequest):
                return None, None, None, (await self.templates.find(caller, template)).name
        known = ", ".join([DEFAULT_TEMPLATE, *sorted(self._cfg.types)])
        raise NotFound(
            f"template {template!r} not found; templates here: {known}, a template of "
            "yours (`paddock template ls`), or a snapshot id"
        )

    async def create(
        self,
        caller: User,
        template: str,
        timeout: int | None,
        metadata: dict[str, str],
        env_vars: dict[str, str],
        allow_internet_access: bool | None,
        network: dict[str, Any] | None,
        auto_pause: bool = False,
        auto_resume: bool = False,
        volume_mounts: Sequence[tuple[str, str]] = (),
    ) -> Sandbox:
        if auto_resume and not auto_pause:
            raise InvalidRequest("autoResume needs autoPause: only a paused sandbox resumes")
        if len(metadata) > _MAX_METADATA or len(env_vars) > _MAX_METADATA * 4:
            raise InvalidRequest("too many metadata entries or env vars")
        for key, value in env_vars.items():
            if not key.isidentifier() or "\x00" in value:
                raise InvalidRequest(f"invalid environment variable {key!r}")
        type_name, image, disk, made_from = await self._template(caller, template)
        net = network_policy(allow_internet_access, network)
        header_rules = await self._header_rules(caller, network)
        # E2B's volumes are the caller's named drives, mounted where the SDK asks.
        drives = [f"{name}@{path}" for name, path in volume_mounts]
        box = await self._boxes.create(
            None,
            type_name,
            DEFAULT_TIMEOUT if timeout is None else timeout,
            # An E2B sandbox is gone when its timeout passes, or paused with autoPause:
            # a box's TTL action, delete or stop (files kept).
            "stop" if auto_pause else "delete",
            drives,
            image=image,
            network=net,
            caller=caller,
            disk=disk,
            template=made_from,
        )
        public = (network or {}).get("allowPublicTraffic") is not False
        extras = SandboxExtras(
            box.id, template, dict(metadata), dict(env_vars), public, auto_resume, header_rules
        )
        await self._keep(box, extras)
        return Sandbox(box, extras)

    async def _keep(self, box: Box, extras: SandboxExtras) -> None:
        """The sandbox's E2B extras, kept; its network rules, at the gateway."""
        await self._repo.put(extras)
        if extras.network_rules and self._rules_changed is not None:
            await self._rules_changed(box)

    async def _header_rules(
        self, caller: User, network: dict[str, Any] | None, box: Box | None = None
    ) -> tuple[HeaderRule, ...]:
        """E2B's network.rules, checked: every secret they name is one of the sandbox
        owner's (the caller's, for a sandbox being made), whose the gateway will use."""
        rules = parse_rules((network or {}).get("rules"))
        if rules:
            if self.secrets is None or self._rules_changed is None:
                raise InvalidRequest("this server has no credential gateway for network rules")
            holder = holder_of(caller) if box is None else await self.secrets.holder_of(box)
            await self.secrets.check(holder, rules)
        return rules

    async def get(self, caller: User, sandbox_id: str) -> Sandbox:
        box = await self._resolve(caller, sandbox_id)
        return Sandbox(box, await self._repo.get(box.id))

    async def _resolve(self, caller: User, sandbox_id: str) -> Box:
        # Only an exact id: a name or id prefix is Paddock's convenience, not E2B's.
        box = await self._boxes.resolve(sandbox_id, caller)
        if box.id != sandbox_id or box.state == BoxState.DELETING:
            raise NotFound(f"sandbox {sandbox_id!r} not found")
        return box

    async def listed(self, caller: User, query: Query) -> tuple[list[Sandbox], str | None]:
        """The caller's sandboxes `query` asks for, one page, and the next page's token."""
        extras = await self._repo.all()
        found = [
            Sandbox(b, extras.get(b.id) or SandboxExtras(b.id))
            for b in await self._boxes.listed(caller)
        ]
        return page(found, query)

    async def fork(
        self, caller: User, sandbox_id: str, timeout: int | None, count: int
    ) -> list[Sandbox | PaddockError]:
        """`count` new sandboxes from one snapshot of the source taken now (its files, not
        its processes: Paddock keeps no memory), each with the source's template, metadata
        and env vars; the source runs on. Each fork succeeds or fails on its own."""
        if not 1 <= count <= MAX_FORKS:
            raise InvalidRequest(f"count must be 1 to {MAX_FORKS}")
        if timeout is not None and timeout <= 0:
            raise InvalidRequest("timeout must be a positive number of seconds")
        source = await self.get(caller, sandbox_id)
        snap = await self.snapshots.take(caller, source.box, None)

        async def one() -> Sandbox | PaddockError:
            try:
                box = await self.snapshots.fork(caller, source.box, snap)
                if timeout is not None:
                    box = await self._boxes.extend(box.id, timeout, caller)
                extras = replace(source.extras, box_id=box.id)
                await self._keep(box, extras)
                return Sandbox(box, extras)
            except PaddockError as exc:
                return exc

        # Side by side: where disks copy, each is a copy of the snapshot's and a start.
        return list(await asyncio.gather(*(one() for _ in range(count))))

    async def snapshot(self, caller: User, sandbox_id: str, name: str | None) -> Snapshot:
        box = await self._resolve(caller, sandbox_id)
        return await self.snapshots.take(caller, box, name)

    async def kill(self, caller: User, sandbox_id: str) -> None:
        box = await self._resolve(caller, sandbox_id)
        # Its E2B row goes with the box's row (store/boxes.py), as with any other delete.
        await self._boxes.delete(box.id, force=True, caller=caller)

    async def set_timeout(self, caller: User, sandbox_id: str, timeout: int) -> Sandbox:
        """E2B's timeout counts from now, as a box's TTL does once extended."""
        if timeout <= 0:
            raise InvalidRequest("timeout must be a positive number of seconds")
        box = await self._resolve(caller, sandbox_id)
        box = await self._boxes.extend(box.id, timeout, caller)
        return Sandbox(box, await self._repo.get(box.id))

    async def pause(self, caller: User, sandbox_id: str) -> Sandbox:
        box = await self._resolve(caller, sandbox_id)
        box = await self._boxes.stop(box.id, caller)
        return Sandbox(box, await self._repo.get(box.id))

    async def connect(self, caller: User, sandbox_id: str, timeout: int | None) -> Sandbox:
        """Resume a paused sandbox (its files were kept) and set its timeout; a running
        one's timeout is only ever made later."""
        box = await self._resolve(caller, sandbox_id)
        # A sandbox pausing (its timeout, a pause) is resumed once paused, as E2B's is,
        # rather than refused while it stops.
        for _ in range(_SETTLE_POLLS):
            if box.state not in (BoxState.STOPPING, BoxState.STARTING):
                break
            await asyncio.sleep(0.1)
            box = await self._resolve(caller, sandbox_id)
        running = box.desired == Desired.RUNNING and box.state == BoxState.RUNNING
        if timeout is not None and timeout > 0:
            # E2B's connect only ever extends a running sandbox's timeout.
            later = self._now() + timedelta(seconds=timeout)
            if not running or (box.expires_at is not None and later > box.expires_at):
                box = await self._boxes.extend(box.id, timeout, caller)
        if box.desired != Desired.RUNNING or box.state != BoxState.RUNNING:
            box = await self._boxes.resume(box.id, caller)
        return Sandbox(box, await self._repo.get(box.id))

    # -- volumes: the caller's named drives (services/drives.py) ---------------------------
    async def volumes(self, caller: User) -> list[str]:
        drives = self._drives
        if drives is None:
            return []
        mine = holder_of(caller)
        return [d.name for d in await drives.all(caller) if d.holder == mine]

    def volume_token(self, caller: User, name: str) -> str:
        if self.volume_content is None:
            raise InvalidRequest("this server has no drives")
        return self.volume_content.token(caller, name)

    async def new_volume(self, caller: User, name: str) -> str:
        if self._drives is None:
            raise InvalidRequest("this server has no drives")
        return (await self._drives.create(name, caller)).name

    async def volume(self, caller: User, volume_id: str) -> str:
        if volume_id not in await self.volumes(caller):
            raise NotFound(f"volume {volume_id!r} not found")
        return volume_id

    async def delete_volume(self, caller: User, volume_id: str) -> None:
        assert self._drives is not None
        await self._drives.remove(await self.volume(caller, volume_id), caller)

    async def update_network(self, caller: User, sandbox_id: str, network: dict[str, Any]) -> Box:
        """E2B's update_network: the egress rules replaced as a whole, as `paddock network`
        sets them (at once, on a running box too); nothing asked is the server's default."""
        box = await self._resolve(caller, sandbox_id)
        rules = {k: v for k, v in network.items() if k != "allow_internet_access"}
        internet = network.get("allow_internet_access")
        asked = network_policy(internet if isinstance(internet, bool) else None, rules)
        header_rules = await self._header_rules(caller, rules, box)
        changed = await self._boxes.set_network(
            box.id, asked or self._boxes.default_network, caller
        )
        if await self._repo.find(box.id) is not None:
            await self._repo.set_rules(box.id, header_rules)
            if self._rules_changed is not None:
                await self._rules_changed(changed)
        return changed

    async def metrics(
        self,
        caller: User,
        sandbox_id: str,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """The sandbox's use over [start, end]: a reading every few seconds of the last
        hour (services/usage_history.py), or where none is kept yet, one taken now. The
        disk figures are of now on each (a disk is not read every few seconds)."""
        box = await self._resolve(caller, sandbox_id)
        stats = await self._stats.one(box.id, caller)
        points = self.history.points(box.id, start, end) if self.history else []
        if not points and stats.cpu_percent is not None:
            now = self._now()
            if (start is None or start <= now) and (end is None or now <= end):
                points = [
                    Point(
                        now,
                        float(stats.cpu_percent),
                        int(stats.memory_bytes or 0),
                        stats.memory_limit_bytes,
                    )
                ]
        disk = {
            "diskUsed": int(stats.disk_bytes or 0),
            "diskTotal": int(stats.disk_quota_bytes or box.disk_mb << 20),
        }
        return [
            {
                "timestamp": p.at.isoformat(),
                "timestampUnix": int(p.at.timestamp()),
                "cpuCount": max(1, round(box.cpus)),
                # E2B's is of the whole sandbox; Paddock's counts 100 per CPU.
                "cpuUsedPct": p.cpu_percent / max(box.cpus, 1e-9),
                "memUsed": p.memory_bytes,
                "memTotal": int(p.memory_limit_bytes or box.memory_mb << 20),
                "memCache": 0,
                **disk,
            }
            for p in points
        ]

    async def env_vars(self, box_id: str) -> dict[str, str]:
        return dict((await self._repo.get(box_id)).env_vars)

    def end_at(self, box: Box) -> datetime:
        start = box.started_at or box.created_at
        if box.expires_at is not None:
            return box.expires_at
        return (start or datetime.now(timezone.utc)) + (
            timedelta(seconds=box.ttl) if box.ttl else _FOREVER
        )
