"""paddockd's composition root: config -> adapters -> services -> app -> uvicorn.

Also the server's admin commands (engine, tokens, OpenAPI export), run as root on the
server itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__, config
from .domain.errors import PaddockError
from .store import perms

if TYPE_CHECKING:
    from .runtime.lxcfs import Lxcfs

log = logging.getLogger("paddockd")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def build(cfg: config.Config):  # type: ignore[no-untyped-def]
    """Wire everything; returns (app, services). No module-level globals anywhere."""
    from fastapi import FastAPI

    from .api.app import create_app
    from .api.deps import Services
    from .desktop.links import DesktopLinks
    from .images.builder import ImageBuilder
    from .netpolicy.dns import DnsFilter, parse_upstream, system_upstreams
    from .netpolicy.nftables import NftablesPolicy
    from .runtime import engine
    from .runtime.base import BoxNetwork
    from .runtime.docker import DockerRuntime
    from .services.agents import AgentService
    from .services.boxes import BoxService
    from .services.capacity import Capacity
    from .services.credentials import CredentialService
    from .services.desktop import DesktopService
    from .services.drives import DriveService
    from .services.egress import EgressLog, EgressService
    from .services.reaper import Reaper
    from .services.reconciler import Reconciler
    from .services.runs import RunService
    from .services.snapshots import SnapshotService
    from .services.stats import StatsService
    from .services.system import SystemService
    from .store.boxes import BoxRepository
    from .store.credentials import CredentialRepository
    from .store.db import Database
    from .store.tokens import TokenRepository

    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = Database(cfg.db_url)
    db.migrate()
    bridge, bridge_cidr = cfg.box_bridge
    own_network = BoxNetwork(f"paddock-{bridge}", bridge, bridge_cidr)
    gateway = str(ipaddress.ip_interface(bridge_cidr).ip)
    lxcfs = lxcfs_of(cfg.engine)
    runtime = DockerRuntime(
        cfg.engine.socket,
        engine.userns_base(cfg.engine.userns_user),
        dns=(gateway,),
        network=own_network if cfg.network.bridge else None,
        build_network=BoxNetwork(
            f"paddock-{cfg.engine.build_bridge}", cfg.engine.build_bridge, cfg.engine.build_cidr
        ),
        lxcfs=lxcfs,
    )
    network = NftablesPolicy(
        bridge,
        bridge_cidr,
        cfg.instance,
        cfg.network.dns_port,
        pid_of=runtime.container_pid,
        refuse_non_public=cfg.network.refuse_non_public,
        builds=(cfg.engine.build_bridge, cfg.engine.build_cidr),
    )
    egress_log = EgressLog(cfg.boxes_dir, utcnow)
    upstreams = [parse_upstream(u) for u in cfg.network.upstream_dns] or system_upstreams()
    resolver = DnsFilter(network, upstreams, egress_log.dns)
    repo = BoxRepository(db)
    reconciler = Reconciler(
        repo,
        runtime,
        network,
        instance=cfg.instance,
        boxes_dir=cfg.boxes_dir,
        stop_timeout=cfg.stop_timeout,
        now=utcnow,
        retention=cfg.snapshot_retention,
    )
    drives = DriveService(repo, runtime, cfg.instance)
    boxes = BoxService(cfg, repo, runtime, reconciler, Capacity.from_config(cfg), utcnow, drives)
    system = SystemService(
        boxes,
        runtime,
        cfg.image.name,
        lambda: reconciler.isolation_failures,
        lambda: reconciler.view_problems,
        lxcfs_dir=cfg.engine.lxcfs_dir,
        data_root=cfg.engine.data_root,
    )
    credentials = CredentialService(
        CredentialRepository(db, cfg.data_dir / "credentials.key"), boxes
    )
    boxes.environment = credentials
    services = Services(
        config=cfg,
        boxes=boxes,
        system=system,
        tokens=TokenRepository(db),
        images=ImageBuilder(cfg.image, runtime, cfg.data_dir / "build"),
        snapshots=SnapshotService(repo, runtime, reconciler, boxes),
        drives=drives,
        egress=EgressService(boxes, egress_log, frozenset({gateway})),
        desktop=DesktopService(
            boxes,
            reconciler.run_dir,
            DesktopLinks(cfg.data_dir / "desktop.key"),
            cfg.desktop.link_ttl,
            engine.userns_base(cfg.engine.userns_user),
        ),
        credentials=credentials,
        agents=AgentService(runtime, cfg.image.name, credentials),
        runs=RunService(boxes, credentials, cfg.data_dir / "runs", cfg.default_agent),
        stats=StatsService(boxes, runtime),
    )
    reaper = Reaper(boxes, utcnow)

    async def keep_engine_up() -> None:
        if cfg.engine.manage and not engine.is_running(cfg.engine):
            log.warning("the box engine is down; starting it")
            await asyncio.to_thread(engine.start_detached, cfg.engine)
            await system.refresh_profile()
        if cfg.engine.manage and lxcfs is not None and not await asyncio.to_thread(lxcfs.ensure):
            log.warning("LXCFS is down and could not be started")

    async def every(seconds: float, job: Callable[[], Awaitable[object]], name: str) -> None:
        while True:
            try:
                await job()
            except PaddockError as exc:
                log.error("%s: %s", name, exc.message)
            except Exception:
                log.exception("%s failed", name)
            await asyncio.sleep(seconds)

    async def record_egress() -> None:
        flows = await network.flows()
        egress_log.connections(flows, lambda ip: b.box_id if (b := network.box_at(ip)) else None)
        await egress_log.flush()

    async def start_resolver() -> None:
        # Retried: the bridge (and so its address) may appear only once the engine is up.
        for _ in range(60):
            try:
                await resolver.start(gateway, cfg.network.dns_port)
                return
            except OSError as exc:
                log.warning("DNS filter on %s:%d: %s", gateway, cfg.network.dns_port, exc)
                await asyncio.sleep(2)

    async def reconcile_pass() -> None:
        await keep_engine_up()
        await reconciler.reconcile_all()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await services.runs.recover()
        try:
            await system.refresh_profile()
            await runtime.ensure_network()
        except PaddockError as exc:
            log.error("engine: %s", exc.message)
        tasks = [
            asyncio.create_task(every(cfg.reconcile_interval, reconcile_pass, "reconcile")),
            asyncio.create_task(every(cfg.reap_interval, reaper.reap, "ttl reaper")),
            asyncio.create_task(every(1.0, record_egress, "egress log")),
            asyncio.create_task(start_resolver()),
        ]
        log.info(
            "paddockd %s listening on %s (instance %s)", __version__, cfg.base_url, cfg.instance
        )
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await resolver.close()
            await egress_log.flush()
            # Cleanups under way finish (a restart would finish them too, just later).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reconciler.drain(), 20)
            db.close()

    return create_app(services, lifespan, cfg.desktop.novnc_dir), services


def lxcfs_of(cfg: config.EngineConfig) -> Lxcfs | None:
    from .runtime.lxcfs import Lxcfs

    return Lxcfs(cfg.lxcfs_dir, cfg.lxcfs, cfg.lxcfs_log) if cfg.lxcfs_dir else None


def serve(cfg: config.Config) -> None:
    import uvicorn

    from .logs import keep_secrets_out
    from .runtime import engine

    # Whatever file the service manager points our output at is root's alone too.
    for stream in (sys.stdout, sys.stderr):
        perms.make_stream_private(stream.fileno())
    if cfg.engine.manage:
        engine.start_detached(cfg.engine)
        # Before any box starts: a box made without LXCFS keeps the host's view until it
        # is made again.
        if (lxcfs := lxcfs_of(cfg.engine)) is not None:
            lxcfs.ensure()
    app, _ = build(cfg)
    # No access log: it would print the desktop page's `?token=`.
    server = uvicorn.Server(
        uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level="info", access_log=False)
    )
    keep_secrets_out()  # now that uvicorn has set up its log handlers
    server.run()


def private_state(cfg: config.Config) -> None:
    """Make what older versions left readable by every local user (state files, the
    engine's log) root's alone, as the umask makes what paddockd creates from now on."""
    engine_root = Path(cfg.engine.data_root)

    def leave(path: Path) -> bool:
        # The engine's data root is dockerd's to set up (0710, group of the boxes' root);
        # a box's run folder is the box's own /run/paddock.
        return path == engine_root or (path.name == "run" and path.parent.parent == cfg.boxes_dir)

    # dockerd, remapping users, refuses a data root whose parents the boxes' root cannot
    # traverse: when its data root is inside ours, ours stays traversable, not listable.
    mode = 0o711 if engine_root.is_relative_to(cfg.data_dir) else 0o700
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    perms.make_private(cfg.data_dir, mode, leave)
    perms.make_file_private(Path(cfg.engine.log_file))


def main(argv: list[str] | None = None) -> int:
    # First of all: nothing paddockd writes (database, keys, logs, records) is for other
    # local users; what must be readable by boxes gets its mode explicitly.
    os.umask(perms.UMASK)
    parser = argparse.ArgumentParser(prog="paddockd", description="The Paddock server.")
    parser.add_argument(
        "--config", type=Path, help="config file (default /etc/paddock/paddockd.toml)"
    )
    parser.add_argument("--version", action="version", version=f"paddockd {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="run the API server (the default)")
    eng = sub.add_parser("engine", help="the box engine (Paddock's own dockerd)")
    eng.add_argument(
        "action",
        choices=["run", "start", "stop", "status"],
        help="run: foreground (systemd); start: detached; stop; status",
    )
    tok = sub.add_parser("token", help="API tokens")
    tok.add_argument("action", choices=["create"])
    tok.add_argument("--name", default="cli", help="a label for the token")
    sub.add_parser("openapi", help="print the OpenAPI document")
    sub.add_parser("migrate", help="create or upgrade the database")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        cfg = config.load(args.config)
    except (OSError, ValueError) as exc:
        print(f"paddockd: bad configuration: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command != "openapi":
            private_state(cfg)
        return _dispatch(args, cfg)
    except PaddockError as exc:
        print(f"paddockd: {exc.message}", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace, cfg: config.Config) -> int:
    from .runtime import engine

    if args.command in (None, "serve"):
        serve(cfg)
    elif args.command == "engine":
        if args.action == "run":
            engine.run_foreground(cfg.engine)
        elif args.action == "start":
            engine.start_detached(cfg.engine)
            print(f"box engine running at {cfg.engine.socket}")
        elif args.action == "stop":
            print("box engine stopped" if engine.stop(cfg.engine) else "box engine was not running")
        else:
            up = engine.is_running(cfg.engine)
            print(f"box engine {'running' if up else 'not running'} ({cfg.engine.socket})")
            return 0 if up else 1
    elif args.command == "token":
        from .store.db import Database
        from .store.tokens import TokenRepository

        cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = Database(cfg.db_url)
        db.migrate()
        print(TokenRepository(db).create_sync(args.name))
    elif args.command == "openapi":
        from .api.app import create_app

        app = create_app(None)  # type: ignore[arg-type]
        print(json.dumps(app.openapi(), indent=2, sort_keys=True))
    elif args.command == "migrate":
        from .store.db import Database

        print(f"database at schema version {Database(cfg.db_url).migrate()}")
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
