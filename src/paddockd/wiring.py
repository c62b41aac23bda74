"""The one composition root: config -> adapters -> services -> app. `paddockd serve`
runs it on the real engine and network; the tests run the same wiring on fakes by
handing in their own adapters."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from fastapi import FastAPI

from . import __version__, config, frontdoor, stacks
from .api.app import create_app
from .api.deps import Services
from .desktop.links import DesktopLinks
from .domain.network import policy
from .gateway.ca import Authority
from .gateway.listeners import CredentialGateway
from .images.builder import ImageBuilder
from .netpolicy.base import NetworkRules
from .netpolicy.dns import DnsFilter, parse_upstream, system_upstreams
from .runtime import datafs, engine
from .runtime.base import BoxEngine, BoxNetwork
from .runtime.lxcfs import Lxcfs
from .services.accounts import AccountService
from .services.activity import Activity
from .services.agents import AgentService
from .services.audit import AuditService
from .services.background import Background, Schedule
from .services.box_events import BoxEvents
from .services.boxes import BoxService
from .services.capacity import Capacity
from .services.credentials import CredentialService
from .services.desktop import DesktopService
from .services.devices import DeviceService
from .services.drives import DriveService
from .services.e2b.envd_tokens import EnvdTokens
from .services.e2b.hosts import SandboxHosts
from .services.e2b.secrets import E2BSecrets
from .services.e2b.service import E2BService
from .services.e2b.snapshots import SandboxSnapshots
from .services.e2b.templates import E2BTemplates
from .services.e2b.volumes import VolumeContent
from .services.egress import EgressLog, EgressService
from .services.events import BoxChanges, EventService
from .services.files import FileService
from .services.gateway import BoxEnvironment, GatewayService
from .services.image_sweep import ImageSweeper
from .services.members import MemberService, TokenService
from .services.metrics import Metrics
from .services.pool import WarmPool
from .services.portable import PortableService
from .services.previews import PreviewService
from .services.reaper import Reaper
from .services.reconciler import Reconciler
from .services.runs import RunService
from .services.secrets import SecretService
from .services.settings import SettingsService
from .services.snapshots import SnapshotService
from .services.ssh import SshService
from .services.stats import StatsService
from .services.system import SystemService
from .services.templates import TemplateService
from .services.terminals import TerminalService
from .services.usage_history import UsageHistory
from .services.webhooks import HttpSender, WebhookService
from .store.accounts import AccountRepository
from .store.audit import AuditRepository
from .store.boxes import BoxRepository
from .store.credentials import CredentialRepository, Sealer, load_key
from .store.db import (
    Database,
    box_credentials,
    box_secrets,
    box_ssh,
    placeholders,
    sandboxes,
)
from .store.devices import DeviceRepository
from .store.e2b_secrets import E2BSecretRepository
from .store.previews import PreviewRepository
from .store.runs import RunRepository
from .store.sandboxes import SandboxRepository
from .store.secrets import SecretRepository
from .store.settings import SettingsRepository
from .store.ssh import SshRepository
from .store.template_tags import TemplateTagRepository
from .store.templates import TemplateRepository
from .store.tokens import TokenRepository
from .store.webhooks import WebhookRepository

log = logging.getLogger("paddockd")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Wired:
    """The object graph; what the app serves is `services`, the rest is for lifecycle
    and for tests that look inside."""

    services: Services
    background: Background
    db: Database
    runtime: BoxEngine
    network: NetworkRules
    repo: BoxRepository
    reconciler: Reconciler
    reaper: Reaper
    sweeper: ImageSweeper
    pool: WarmPool
    box_events: BoxEvents | None = None


def wire(
    cfg: config.Config,
    *,
    runtime: BoxEngine | None = None,
    network: NetworkRules | None = None,
    now: Callable[[], datetime] = utcnow,
) -> Wired:
    """Build everything, in order. `runtime` and `network` replace the Docker engine and
    the nftables rules (tests pass fakes); no module-level globals anywhere."""
    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = Database(cfg.db_url)
    db.migrate()
    # The owner's changed settings over the file's: everything below is built from these.
    settings = SettingsService(SettingsRepository(db), cfg)
    cfg = settings.current
    gateway = str(ipaddress.ip_interface(cfg.box_bridge[1]).ip)
    userns_base = engine.userns_base(cfg.engine.userns_user)
    if runtime is None and network is None:
        runtime, network = _real_adapters(cfg, gateway, userns_base)
    if runtime is None or network is None:
        raise ValueError("pass both a runtime and a network (fakes come in pairs)")
    egress_log = EgressLog(cfg.boxes_dir, now)
    upstreams = [parse_upstream(u) for u in cfg.network.upstream_dns] or system_upstreams()
    # The DNS filter asks the gateway which names' HTTPS it takes (bound by secrets); the
    # gateway is made with the services below.
    bound: list[Callable[[str, str], bool]] = []
    resolver = DnsFilter(
        network, upstreams, egress_log.dns, bound=lambda box, name: any(b(box, name) for b in bound)
    )
    changes = BoxChanges()
    # Rows that go with their box, whoever deletes it: E2B's, and what keys and secrets it
    # was given (its placeholders are refused from then on).
    dependents = (
        sandboxes.c.box_id,
        box_credentials.c.box_id,
        box_secrets.c.box_id,
        placeholders.c.box_id,
        box_ssh.c.box_id,
    )
    repo = BoxRepository(db, changes.changed, dependents=dependents)
    accounts_repo = AccountRepository(db)
    accounts = AccountService(accounts_repo)
    reconciler = Reconciler(
        repo,
        runtime,
        network,
        instance=cfg.instance,
        boxes_dir=cfg.boxes_dir,
        stop_timeout=cfg.stop_timeout,
        now=now,
        holders=accounts.holders,
        retention=cfg.snapshot_retention,
        disk_mbps_per_cpu=cfg.disk_mbps_per_cpu,
    )
    capacity = Capacity.from_config(cfg)
    drives = DriveService(
        repo, runtime, cfg.instance, accounts, capacity, deletions=reconciler.deletions
    )
    pool = WarmPool(
        cfg.pool_sizes,
        cfg.pool.max_boxes,
        cfg.types,
        cfg.image.name,
        repo=repo,
        runtime=runtime,
        reconciler=reconciler,
        capacity=capacity,
        instance=cfg.instance,
        now=now,
        refill_delay=cfg.pool.refill_delay,
        template_sizes=cfg.pool.templates,
        default_type=cfg.default_type,
    )
    activity = Activity()
    boxes = BoxService(
        cfg,
        repo,
        runtime,
        reconciler,
        capacity,
        now,
        drives,
        accounts_repo.limits,
        activity,
        pool=pool,
        network=network,
    )
    images = ImageBuilder(cfg.image, runtime, cfg.data_dir / "build")
    system = SystemService(
        boxes,
        runtime,
        cfg.image.name,
        lambda: reconciler.isolation_failures,
        lambda: reconciler.view_problems,
        lxcfs_dir=cfg.engine.lxcfs_dir,
        data_root=cfg.engine.data_root,
        disk_limits=(lambda: datafs.describe(cfg.engine)) if cfg.engine.manage else None,
        pool=pool,
        image_pending=images.pending,
    )
    sealer = Sealer(cfg.data_dir / "credentials.key")
    keys, secret_repo = CredentialRepository(db, sealer), SecretRepository(db, sealer)
    sandbox_repo = SandboxRepository(db)
    e2b_secrets = E2BSecrets(E2BSecretRepository(db, sealer), sandbox_repo, accounts.holders)
    credentials = CredentialService(keys, boxes, accounts, secret_repo, f"http://{gateway}")
    grants = GatewayService(
        network,
        boxes,
        accounts,
        keys,
        secret_repo,
        open_ranges=cfg.network.open_ranges,
        bridges=(cfg.box_bridge[1], cfg.engine.build_cidr),
        headers=e2b_secrets,
    )
    bound.append(grants.binds)
    credentials.changed.append(grants.forget_keys)
    authority = Authority(cfg.data_dir / "gateway")
    environment = BoxEnvironment(credentials, grants, secret_repo, runtime, authority.pem)
    boxes.environment = environment
    secrets = SecretService(secret_repo, boxes, accounts, grants, environment, e2b_secrets)
    runs = RunService(
        boxes,
        credentials,
        RunRepository(db),
        cfg.data_dir / "runs",
        cfg.default_agent,
        holds=grants,
    )
    tokens = TokenRepository(db)

    def public_url() -> str:
        return settings.current.public_url or frontdoor.public_url(cfg.port)

    def split_url() -> SplitResult:
        """The public URL's parts; a URL that cannot be parsed (checked when set, but a
        front door's file is not) routes nothing rather than failing every request."""
        try:
            split = urlsplit(public_url())
            _ = split.port
        except ValueError:
            return urlsplit("")
        return split

    def hostname() -> str | None:
        """The server's own hostname behind HTTPS: previews get PORT-BOX.HOSTNAME."""
        split = split_url()
        return split.hostname if split.scheme == "https" else None

    def routed_host() -> str | None:
        """The host previews answer under as PORT-BOX.HOST: the hostname, or `localhost`
        for a server on loopback (browsers send its subdomains to loopback)."""
        split = split_url()
        if split.scheme == "https":
            return split.hostname
        return "localhost" if split.hostname in ("127.0.0.1", "localhost", "::1") else None

    def sandbox_domain() -> str | None:
        """E2B's sandbox domain: `get_host(port)` is PORT-ID.DOMAIN (services/e2b/hosts.py)."""
        host = routed_host()
        port = split_url().port
        return f"{host}:{port}" if host and port else host

    previews = PreviewService(
        PreviewRepository(db),
        boxes,
        runtime,
        load_key(cfg.data_dir / "preview.key"),
        public_url,
        hostname,
        activity,
        owner_active=accounts_repo.exists,
        routed_host=routed_host,
    )

    templates = TemplateService(
        TemplateRepository(db), boxes, reconciler, runtime, cfg, cfg.data_dir / "templates"
    )
    boxes.templates = pool.templates = templates
    stats = StatsService(boxes, runtime)
    webhooks = WebhookService(
        WebhookRepository(db, sealer), HttpSender(), cfg.webhook_retry_seconds
    )
    box_events = BoxEvents(boxes, webhooks.publish)
    repo.watcher = box_events
    runs.finished = box_events.run_finished
    history = UsageHistory(boxes, runtime, now, sandbox_repo.ids)
    envd_tokens = EnvdTokens(load_key(cfg.data_dir / "envd.key"))
    snapshots = SnapshotService(repo, runtime, reconciler, boxes, limit=cfg.snapshot_limit)
    services = Services(
        config=cfg,
        boxes=boxes,
        system=system,
        tokens=tokens,
        images=images,
        snapshots=snapshots,
        drives=drives,
        egress=EgressService(boxes, egress_log, frozenset({gateway})),
        desktop=DesktopService(
            boxes,
            reconciler.run_dir,
            DesktopLinks(cfg.data_dir / "desktop.key"),
            cfg.desktop.link_ttl,
            userns_base,
        ),
        credentials=credentials,
        secrets=secrets,
        templates=templates,
        agents=AgentService(runtime, cfg.image.name, credentials),
        runs=runs,
        stats=stats,
        accounts=accounts,
        devices=DeviceService(DeviceRepository(db), tokens, public_url),
        user_tokens=TokenService(tokens),
        members=MemberService(
            accounts_repo,
            tokens,
            boxes,
            credentials,
            public_url,
            previews,
            secrets,
            templates,
            webhooks,
        ),
        previews=previews,
        events=EventService(changes, boxes, box_events),
        terminals=TerminalService(boxes),
        files=FileService(boxes),
        portable=PortableService(runtime, reconciler, boxes, snapshots, cfg.image.name),
        ssh=SshService(SshRepository(db), boxes),
        audit=AuditService(AuditRepository(db), cfg.audit_days),
        metrics=Metrics(repo.all, lambda: system.status(None)),
        webhooks=webhooks,
        settings=settings,
        e2b=E2BService(
            cfg,
            boxes,
            stats,
            tokens,
            sandbox_repo,
            SandboxSnapshots(boxes, snapshots),
            E2BTemplates(templates, cfg.data_dir / "templates", TemplateTagRepository(db)),
            now,
            envd_tokens,
            sandbox_domain,
            history,
            drives,
            e2b_secrets,
            environment.rules_changed,
            VolumeContent(
                drives, load_key(cfg.data_dir / "volume.key"), accounts_repo.exists, userns_base
            ),
        ),
    )
    previews.hosts = SandboxHosts(sandbox_repo, boxes, envd_tokens)

    def reconfigure(new: config.Config) -> None:
        """A changed setting, where it is read: what starts from now on follows it."""
        room = Capacity.from_config(new)
        boxes.configure(new, room)
        drives.configure(room)
        pool.configure(new.pool_sizes, new.pool.max_boxes, new.types, new.default_type, room)
        if services.e2b is not None:
            services.e2b.configure(new)

    async def reachable(new: config.Config) -> None:
        await boxes.reachable(policy(new.network.default_mode, new.network.default_allow))

    settings.changed.append(reconfigure)
    settings.checks.append(reachable)
    settings.types_in_use = lambda: _types_in_use(repo)
    reaper = Reaper(boxes, now, previews)
    reaper.changes = changes
    sweeper = ImageSweeper(
        repo,
        runtime,
        reconciler,
        instance=cfg.instance,
        keep=frozenset({cfg.image.name}),
        grace=cfg.image_sweep_grace,
        now=now,
    )
    ca_file = Path(cfg.network.gateway_ca_file) if cfg.network.gateway_ca_file else None
    background = Background(
        Schedule(
            cfg.reconcile_interval,
            cfg.reap_interval,
            1.0,
            gateway,
            cfg.network.dns_port,
            (cfg.network.gateway_port, cfg.network.gateway_intercept_port),
        ),
        runtime=runtime,
        network=network,
        system=system,
        reconciler=reconciler,
        sweeper=sweeper,
        reaper=reaper,
        egress_log=egress_log,
        resolver=resolver,
        gateway=CredentialGateway(grants, authority, ca_file=ca_file),
        runs=runs,
        pool=pool,
        audit=services.audit,
        history=history,
        webhooks=webhooks,
        box_events=box_events,
        restart_engine=_engine_restarter(cfg.engine) if cfg.engine.manage else None,
    )
    background.ran = services.metrics.ran
    egress_log.seen = services.metrics.seen
    egress_log.refused = box_events.egress_refused
    return Wired(
        services,
        background,
        db,
        runtime,
        network,
        repo,
        reconciler,
        reaper,
        sweeper,
        pool,
        box_events,
    )


async def _types_in_use(repo: BoxRepository) -> set[str]:
    return {b.type for b in await repo.all()}


def app(wired: Wired) -> FastAPI:
    """The API, with the background work running for as long as it serves."""

    cfg = wired.services.config

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        stacks.enable(asyncio.get_running_loop())
        await wired.background.start()
        log.info(
            "paddockd %s listening on %s (instance %s)", __version__, cfg.base_url, cfg.instance
        )
        try:
            yield
        finally:
            await wired.services.terminals.shutdown()
            await wired.background.stop()
            wired.db.close()

    return create_app(wired.services, lifespan, cfg.desktop.novnc_dir)


def _real_adapters(
    cfg: config.Config, gateway: str, userns_base: int | None
) -> tuple[BoxEngine, NetworkRules]:
    from .netpolicy.nftables import Gateway, NftablesPolicy
    from .runtime.docker import DockerRuntime
    from .runtime.drivefs import DriveFs

    bridge, bridge_cidr = cfg.box_bridge
    runtime = DockerRuntime(
        cfg.engine.socket,
        userns_base,
        dns=(gateway,),
        network=BoxNetwork(f"paddock-{bridge}", bridge, bridge_cidr)
        if cfg.network.bridge
        else None,
        build_network=BoxNetwork(
            f"paddock-{cfg.engine.build_bridge}", cfg.engine.build_bridge, cfg.engine.build_cidr
        ),
        lxcfs=lxcfs_of(cfg.engine),
        drives=DriveFs(Path(cfg.engine.data_root) / "paddock-drives", userns_base),
        disks=Path(cfg.engine.data_root) / "paddock-disks",
        instance=cfg.instance,
    )
    network = NftablesPolicy(
        bridge,
        bridge_cidr,
        cfg.instance,
        cfg.network.dns_port,
        pid_of=runtime.container_pid,
        refuse_non_public=cfg.network.refuse_non_public,
        builds=(cfg.engine.build_bridge, cfg.engine.build_cidr),
        open_ranges=cfg.network.open_ranges,
        gateway=Gateway(cfg.network.gateway_port, cfg.network.gateway_intercept_port),
    )
    return runtime, network


def lxcfs_of(cfg: config.EngineConfig) -> Lxcfs | None:
    return Lxcfs(cfg.lxcfs_dir, cfg.lxcfs, cfg.lxcfs_log) if cfg.lxcfs_dir else None


def _engine_restarter(cfg: config.EngineConfig) -> Callable[[], bool]:
    lxcfs = lxcfs_of(cfg)

    def restart() -> bool:
        if lxcfs is not None and not lxcfs.ensure():
            log.warning("LXCFS is down and could not be started")
        if engine.is_running(cfg):
            return False
        engine.start_detached(cfg)
        return True

    return restart
