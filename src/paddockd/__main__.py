"""paddockd's entry point: `serve` runs the composition root (wiring.py) under uvicorn.

Also the server's admin commands (engine, tokens, OpenAPI export), run as root on the
server itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from . import __version__, config
from .domain.errors import PaddockError
from .store import perms


def more_descriptors(wanted: int = 65536) -> None:
    """Room for the boxes' connections (the gateway holds two descriptors for each, up to
    its caps) beside the API's, DNS's and the database's: the soft limit raised toward the
    hard one. systemd's default soft limit, 1024, would let boxes run paddockd out."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve(cfg: config.Config) -> None:
    from .memory import fewer_malloc_arenas

    fewer_malloc_arenas()  # before any thread starts
    more_descriptors()
    import uvicorn

    from . import wiring
    from .logs import keep_secrets_out, remember
    from .runtime import engine

    # Whatever file the service manager points our output at is root's alone too.
    for stream in (sys.stdout, sys.stderr):
        perms.make_stream_private(stream.fileno())
    if cfg.engine.manage:
        engine.start_detached(cfg.engine)
        # Before any box starts: a box made without LXCFS keeps the host's view until it
        # is made again.
        if (lxcfs := wiring.lxcfs_of(cfg.engine)) is not None:
            lxcfs.ensure()
    app = wiring.app(wiring.wire(cfg))
    # No access log: it would print the desktop page's `?token=`. Streams that never end
    # by themselves (a dashboard's live list, a followed log) get 10 s to go on shutdown.
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=cfg.host,
            port=cfg.port,
            log_level="info",
            access_log=False,
            timeout_graceful_shutdown=10,
        )
    )
    keep_secrets_out()  # now that uvicorn has set up its log handlers
    remember()
    server.run()


def private_state(cfg: config.Config) -> None:
    """Make what older versions left readable by every local user (state files, the
    engine's log) root's alone, as the umask makes what paddockd creates from now on."""
    engine_root = Path(cfg.engine.data_root)

    def leave(path: Path) -> bool:
        # The engine's data root is dockerd's to set up (0710, group of the boxes' root);
        # a box's run folder is the box's own /run/paddock, and its resolv.conf the box's
        # /etc/resolv.conf (0644: at 0600 a running box could no longer read it).
        return path == engine_root or (
            path.name in ("run", "resolv.conf") and path.parent.parent == cfg.boxes_dir
        )

    # dockerd, remapping users, refuses a data root whose parents the boxes' root cannot
    # traverse: when its data root is inside ours, ours stays traversable, not listable.
    mode = 0o711 if engine_root.is_relative_to(cfg.data_dir) else 0o700
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    perms.make_private(cfg.data_dir, mode, leave)
    perms.make_file_private(Path(cfg.engine.log_file))
    # What an earlier start took to 0600 (boxes then lost their DNS) is readable again.
    for resolv in cfg.boxes_dir.glob("*/resolv.conf"):
        perms.make_file_readable(resolv)


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
        choices=["run", "start", "stop", "status", "disk"],
        help="run: foreground (systemd); start: detached; stop; status; disk: how boxes' "
        "disks are limited (with --grow GIB: make the engine's filesystem that big)",
    )
    eng.add_argument("--grow", type=int, metavar="GIB", help="with disk: the new size in GiB")
    tok = sub.add_parser("token", help="API tokens")
    tok.add_argument("action", choices=["create"])
    tok.add_argument("--name", default="cli", help="a label for the token")
    tok.add_argument(
        "--metrics", action="store_true", help="one that reads /metrics only (a scraper's)"
    )
    conf = sub.add_parser(
        "configure",
        help="serve this machine under a hostname with HTTPS (Caddy in front)",
        description="Write Caddy's configuration for HOSTNAME: HTTPS on ports 80/443 in front "
        "of paddockd (which stays on 127.0.0.1), HTTP redirected, HSTS on; Caddy is reloaded "
        "when it runs. ./install.sh --hostname runs this and starts Caddy.",
    )
    conf.add_argument("--hostname", required=True, help="e.g. paddock.example.com (DNS name)")
    conf.add_argument(
        "--tls",
        choices=["acme", "internal"],
        default="acme",
        help="acme: a public certificate (Let's Encrypt/ZeroSSL, needs ports 80/443 reachable); "
        "internal: Caddy's local CA (tests, private networks)",
    )
    conf.add_argument("--email", default="", help="for the certificate account: expiry notices")
    conf.add_argument(
        "--service",
        action="store_true",
        help="Caddy runs as systemd's paddock-caddy.service (its own user, state and admin "
        "socket folders) rather than under paddockd's supervisor",
    )
    sub.add_parser(
        "setup-link",
        help="print a new one-time link that creates the owner account (voids the last one)",
    )
    bak = sub.add_parser(
        "backup",
        help="write the server's state to one file, while it runs",
        description="The database (an online copy: consistent while paddockd writes), "
        "paddockd's keys, and each box's current disk (what it resumes from; with "
        "--with-snapshots, every snapshot's too; with --with-drives, every named drive's "
        "files), as one tar. Restore it with `paddockd restore` onto a fresh install. "
        "docs/operations.md",
    )
    bak.add_argument("-o", "--output", required=True, help="the file to write (- for stdout)")
    bak.add_argument("--with-snapshots", action="store_true", help="every snapshot's disk too")
    bak.add_argument(
        "--with-drives",
        action="store_true",
        help="every named drive's files too (copied as they are: stop boxes writing to "
        "them for a consistent copy)",
    )
    res = sub.add_parser(
        "restore",
        help="bring a backup back (paddockd stopped)",
        description="Write a backup's database, keys and disks into this install. paddockd "
        "must be stopped; the install must have no accounts or boxes yet, unless --force "
        "(which replaces them). Every box comes back stopped: `paddock resume` starts it.",
    )
    res.add_argument("file", help="the backup (- for stdin)")
    res.add_argument("--force", action="store_true", help="replace this server's state")
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
        elif args.action == "disk":
            return _disk(cfg.engine, args.grow)
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
        scope = "metrics" if args.metrics else None
        print(TokenRepository(db).create_sync(args.name, scope=scope))
    elif args.command == "setup-link":
        return _setup_link(cfg)
    elif args.command == "configure":
        return _configure(cfg, args)
    elif args.command == "openapi":
        from .api.app import create_app

        app = create_app(None)  # type: ignore[arg-type]
        print(json.dumps(app.openapi(), indent=2, sort_keys=True))
    elif args.command == "backup":
        return _backup(cfg, args.output, args.with_snapshots, args.with_drives)
    elif args.command == "restore":
        return _restore(cfg, args.file, args.force)
    elif args.command == "migrate":
        from .store.db import Database

        print(f"database at schema version {Database(cfg.db_url).migrate()}")
    return 0


def _backup(cfg: config.Config, output: str, with_snapshots: bool, with_drives: bool) -> int:
    from . import backup

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    if output == "-":
        made = backup.backup(cfg, sys.stdout.buffer, with_snapshots, say, with_drives)
    else:
        path = Path(output)
        partial = path.with_name(path.name + ".partial")
        try:
            partial.unlink(missing_ok=True)
            # 0600 from the first byte, and never through a link someone left there.
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with os.fdopen(os.open(partial, flags, 0o600), "wb") as out:
                made = backup.backup(cfg, out, with_snapshots, say, with_drives)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        path.chmod(0o600)  # it holds the keys that open every secret
    drives = f", {len(made.drives)} drive(s)" if with_drives else ""
    say(
        f"backup of {len(made.boxes)} box(es), {len(made.disks)} disk(s){drives} written to "
        f"{output}"
    )
    return 0


def _restore(cfg: config.Config, source: str, force: bool) -> int:
    from . import backup

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        if source == "-":
            done = backup.restore(cfg, sys.stdin.buffer, force, say)
        else:
            with open(source, "rb") as f:
                done = backup.restore(cfg, f, force, say)
    except OSError as exc:
        print(f"paddockd: {source}: {exc.strerror}", file=sys.stderr)
        return 1
    print(
        f"restored {done.boxes} box(es) (stopped), {done.disks} disk(s) and "
        f"{done.drives} drive(s)"
        + (
            f"; {done.dropped_snapshots} snapshot(s) whose disk was not in it left out"
            if done.dropped_snapshots
            else ""
        )
        + ". Start paddockd, then `paddock resume BOX`."
    )
    return 0


def _setup_link(cfg: config.Config) -> int:
    from . import frontdoor
    from .services.accounts import SETUP_LINK_TTL, AccountService
    from .store.accounts import AccountRepository
    from .store.db import Database

    cfg.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = Database(cfg.db_url)
    db.migrate()
    repo = AccountRepository(db)
    if repo.has_owner_sync():
        print(
            "paddockd: the owner account exists already; log in at "
            f"{(cfg.public_url or frontdoor.public_url(cfg.port))}/login",
            file=sys.stderr,
        )
        return 1
    token = AccountService(repo).new_setup_link()
    hours = int(SETUP_LINK_TTL // 3600)
    print(f"{(cfg.public_url or frontdoor.public_url(cfg.port))}/setup/{token}")
    print(f"(creates the owner account; works once, for {hours} hours)", file=sys.stderr)
    return 0


def _configure(cfg: config.Config, args: argparse.Namespace) -> int:
    import subprocess

    from . import frontdoor

    try:
        hostname = frontdoor.check_hostname(args.hostname)
    except ValueError as exc:
        print(f"paddockd: --hostname: {exc}", file=sys.stderr)
        return 2
    door = frontdoor.FrontDoor(hostname, args.tls, f"127.0.0.1:{cfg.port}", args.email)
    if args.service:
        door = frontdoor.as_service(door)
    frontdoor.CADDYFILE.parent.mkdir(parents=True, exist_ok=True)
    frontdoor.CADDYFILE.write_text(door.caddyfile())
    frontdoor.CADDYFILE.chmod(0o644)  # no secrets; Caddy's own user reads it under systemd
    print(f"wrote {frontdoor.CADDYFILE}: {door.url} -> paddockd on 127.0.0.1:{cfg.port}")
    # Caddy finds its admin socket in the file itself; not running yet is fine.
    caddyfile = str(frontdoor.CADDYFILE)
    reload = subprocess.run(
        ["caddy", "reload", "--config", caddyfile, "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
    )
    if reload.returncode == 0:
        print("Caddy reloaded")
    if args.tls == "internal":
        print(f"Caddy's local CA root (trust it on clients): {door.root_certificate}")
    return 0


def _disk(cfg: config.EngineConfig, grow: int | None) -> int:
    """Exit 0 when the data root is where it should be, 3 when a move onto its own
    filesystem waits for the engine's next start (install.sh restarts it then)."""
    from .runtime import datafs

    if grow is not None:
        try:
            datafs.grow(cfg, grow)
        except (OSError, ValueError) as exc:
            print(f"paddockd: cannot grow the engine's disk: {exc}", file=sys.stderr)
            return 1
    found = datafs.state(cfg)
    print(f"{found.path}: {datafs.describe(cfg)}")
    return 3 if cfg.data_image and not found.own and Path(cfg.data_root).exists() else 0


# What the server extra brings; a client-only install (`pip install paddock`) has the
# paddockd command too, and says so instead of failing on an import.
_SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "anyio", "docker")


def run() -> None:
    import importlib.util

    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing and not {"-h", "--help", "--version"} & set(sys.argv[1:]):
        sys.stderr.write(
            "paddockd: this is the server, and this install is the client only (no "
            f"{', '.join(missing)}). On the server machine run ./install.sh, or pip install "
            "'paddock[server]'; from here, the client is `paddock`.\n"
        )
        sys.exit(2)
    sys.exit(main())


if __name__ == "__main__":
    run()
