"""Server configuration: one TOML file (default /etc/paddock/paddockd.toml), with a few
environment overrides for scripts and tests. The only input of the composition root."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomllib

from .domain.box import BoxType, TtlAction
from .domain.errors import InvalidRequest
from .domain.network import METADATA, policy

DEFAULT_CONFIG_PATH = Path("/etc/paddock/paddockd.toml")

DEFAULT_TYPES = {
    "small": BoxType(
        "small", 1.0, 1024, 1024, "1 CPU, 1 GiB memory: scripts, small projects", 10240
    ),
    "medium": BoxType(
        "medium", 2.0, 4096, 4096, "2 CPUs, 4 GiB: builds, test suites, a desktop", 20480
    ),
    "large": BoxType("large", 4.0, 8192, 8192, "4 CPUs, 8 GiB: heavy builds, Docker inside", 40960),
}


@dataclass(frozen=True)
class EngineConfig:
    socket: str = "/run/paddock/docker.sock"
    # paddockd starts (and restarts) its own dockerd unless a service manager does.
    manage: bool = True
    dockerd: str = "dockerd"
    data_root: str = "/var/lib/paddock/engine"
    # The data root lives on XFS in this sparse file, so each box's disk has a size
    # (see runtime/datafs.py); "" keeps it on the host's filesystem, sizes unenforced.
    data_image: str = "/var/lib/paddock/engine.xfs"
    data_size_gb: int = 0  # 0: 80% of the host's free space when the file is made
    # New boxes, forks and snapshots are refused below this much free space.
    min_free_mb: int = 2048
    exec_root: str = "/run/paddock/engine"
    pidfile: str = "/run/paddock/dockerd.pid"
    log_file: str = "/var/log/paddock/engine.log"
    bridge: str = "paddock0"
    bridge_cidr: str = "10.213.0.1/16"
    # Image builds run on a bridge of their own: the boxes' bridge lets only boxes out.
    build_bridge: str = "pdbuild0"
    build_cidr: str = "10.212.0.1/24"
    userns_user: str = "paddock"
    # Each running box on a host uid range of its own (runtime/identity.py), where the
    # kernel can idmap (Linux 6.3+); off: every box on the engine's one range.
    box_identities: bool = True
    cgroup_parent: str = "paddock"
    # Where LXCFS is mounted (boxes see their own CPUs, memory and uptime in /proc through
    # it); "" turns that off. Started by paddockd when `manage` is on, else by lxcfs.service.
    lxcfs_dir: str = "/var/lib/lxcfs"
    lxcfs: str = "lxcfs"
    lxcfs_log: str = "/var/log/paddock/lxcfs.log"


@dataclass(frozen=True)
class ImageConfig:
    name: str = "paddock-box:latest"
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    security_mirror: str = "http://deb.debian.org/debian-security"
    # Certificate authorities the host added (a corporate TLS proxy's, say): boxes trust
    # them too, so npm, pip and the agents work through the same proxy. "" for none.
    extra_ca_dir: str = "/usr/local/share/ca-certificates"


@dataclass(frozen=True)
class NetworkConfig:
    # Policy of a box created without one: allow-all, deny-all or allowlist (+ allow).
    default_mode: str = "allow-all"
    default_allow: tuple[str, ...] = ()
    # Where Paddock's DNS resolver forwards allowed names: "host" or "host:port"; empty
    # means the host's own resolvers from /etc/resolv.conf.
    upstream_dns: tuple[str, ...] = ()
    # The resolver listens on the bridge address at this port; boxes' DNS (port 53 on the
    # bridge address) is redirected to it. One port per instance.
    dns_port: int = 10053
    # Allow-all reaches the public internet only: private (RFC 1918), CGNAT, loopback,
    # multicast and reserved ranges are refused unless an allowlist names them. false
    # relaxes that (cloud metadata and the host's own networks stay refused).
    refuse_non_public: bool = True
    # Non-public ranges (say a database on the server's private network) that allowlists
    # may name: nothing else of them, nor the host's own networks, can be opened by any
    # box's allowlist or E2B's allowOut. Set here, by the server's owner.
    open_ranges: tuple[str, ...] = ()
    # The credential gateway (docs/security.md) listens on the bridge address at these
    # ports: boxes' HTTP to that address (port 80) is redirected to the first, their HTTPS
    # to hosts a secret of theirs is bound to, to the second. One pair per instance.
    gateway_port: int = 10080
    gateway_intercept_port: int = 10443
    # Certificates the gateway trusts beside the system's when it connects to a provider
    # or a bound host (a PEM file: a company CA, a test CA).
    gateway_ca_file: str = ""
    # A bridge of this instance's own (name, gateway/subnet like 10.214.7.1/24), for a
    # second server on one engine (tests): the engine's default bridge when empty.
    bridge: str = ""
    bridge_cidr: str = ""


@dataclass(frozen=True)
class DesktopConfig:
    # noVNC's files (Debian's `novnc` package, unpacked by install.sh without its
    # dependencies); /usr/share/novnc is used when this does not exist.
    novnc_dir: Path = Path("/opt/paddock/novnc/usr/share/novnc")
    link_ttl: int = 900  # seconds a desktop link can be opened


@dataclass(frozen=True)
class PoolConfig:
    # Ready boxes kept per box type (services/pool.py); None: 2 of the default type.
    types: dict[str, int] | None = None
    # Ready boxes kept per template (the owner's or a shared one, by name), of the type
    # the template's defaults name (else the default type).
    templates: dict[str, int] = field(default_factory=dict)
    # All types together; 0 turns the pool off. Capacity bounds it too.
    max_boxes: int = 4
    # The pool refills only once no user's create or resume has run for this long.
    refill_delay: float = 1.0


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 7423
    # The address people use, in links paddockd prints (setup, invites, previews): "" takes
    # it from the front door `paddockd configure` set up, else http://127.0.0.1:PORT.
    public_url: str = ""
    # Containers are labelled with it, so two servers on one engine (say, tests beside an
    # installed server) never reconcile each other's boxes away.
    instance: str = "default"
    data_dir: Path = Path("/var/lib/paddock")
    default_type: str = "small"
    default_ttl: int = 3600
    # Seconds a box may go unused before it stops (0: never), unless `new` says otherwise.
    idle_stop: int = 0
    # The shortest idle stop a box may ask for: below a minute a box stops between two
    # commands of a script.
    idle_stop_min: int = 60
    ttl_action: TtlAction = TtlAction.STOP
    stop_timeout: int = 10
    snapshot_retention: int = 5  # automatic (stop) snapshots kept per box
    # The most snapshots one box keeps: a copy costs nothing when made, but holds what the
    # box overwrites after it, up to the box's disk size each (docs/server.md).
    snapshot_limit: int = 50
    # Each box's disk reads and writes are capped at this many MB/s (and 20x that in
    # operations/s) per CPU of its type, so one box's I/O cannot stall the host's disk for
    # every other box (bench.neighbours); 0: no cap.
    disk_mbps_per_cpu: int = 50
    default_agent: str = "claude"  # for `paddock prompt` without --agent
    reap_interval: float = 5.0
    audit_days: float = 90.0  # how long the audit log keeps an entry
    # A failed webhook delivery is tried again after 1, 3, 9, ... times this (services/webhooks.py).
    webhook_retry_seconds: float = 5.0
    reconcile_interval: float = 30.0
    # Snapshot images younger than this are never swept as unreferenced: their row may
    # be on its way.
    image_sweep_grace: float = 600.0
    # services/capacity.py: memory claims are counted, CPU is shared unless a capacity is set.
    capacity_cpus: float = 0.0  # 0: host cores x cpu_overcommit, or not counted
    cpu_overcommit: float = 0.0  # 0: CPU is not counted (each box is capped and weighted)
    capacity_memory_mb: int = 0  # 0: (host memory - memory_reserve_mb) x memory_overcommit
    memory_overcommit: float = 4.0
    memory_reserve_mb: int = 1024
    types: dict[str, BoxType] = field(default_factory=lambda: dict(DEFAULT_TYPES))
    engine: EngineConfig = field(default_factory=EngineConfig)
    image: ImageConfig = field(default_factory=ImageConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    desktop: DesktopConfig = field(default_factory=DesktopConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)

    @property
    def pool_sizes(self) -> dict[str, int]:
        """How many ready boxes the pool keeps of each type (types with none left out)."""
        if self.pool.max_boxes <= 0:
            return {}
        sizes = self.pool.types if self.pool.types is not None else {self.default_type: 2}
        return {name: n for name, n in sizes.items() if n > 0}

    @property
    def box_bridge(self) -> tuple[str, str]:
        """The bridge the boxes sit on, and its gateway address/subnet."""
        if self.network.bridge:
            return self.network.bridge, self.network.bridge_cidr
        return self.engine.bridge, self.engine.bridge_cidr

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'paddock.db'}"

    @property
    def boxes_dir(self) -> Path:
        return self.data_dir / "boxes"

    @property
    def clients_dir(self) -> Path:
        """The clients paddockd hands out at /clients (scripts/build-clients writes them)."""
        return self.data_dir / "clients"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _section(cls: type[Any], data: dict[str, Any], where: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown setting(s) in [{where}]: {', '.join(sorted(unknown))}")
    return cls(**data)


def _desktop(data: dict[str, Any]) -> DesktopConfig:
    if "novnc_dir" in data:
        data = {**data, "novnc_dir": Path(data["novnc_dir"])}
    cfg: DesktopConfig = _section(DesktopConfig, data, "desktop")
    return cfg


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}


def load(path: Path | None = None) -> Config:
    path = path or Path(os.environ.get("PADDOCKD_CONFIG", DEFAULT_CONFIG_PATH))
    raw: dict[str, Any] = tomllib.loads(path.read_text()) if path.exists() else {}
    server = dict(raw.get("server", {}))
    boxes = dict(raw.get("boxes", {}))
    capacity = raw.get("capacity", {})
    flat: dict[str, Any] = {**server, **boxes}
    if "data_dir" in flat:
        flat["data_dir"] = Path(flat["data_dir"])
    if "ttl_action" in flat:
        flat["ttl_action"] = TtlAction(flat["ttl_action"])
    for key, value in capacity.items():
        own = ("cpu_overcommit", "memory_overcommit", "memory_reserve_mb")
        flat[key if key in own else f"capacity_{key}"] = value
    types = dict(DEFAULT_TYPES)
    for name, spec in raw.get("types", {}).items():
        types[name] = BoxType(name=name, **spec)
    cfg: Config = _section(Config, flat, "server/boxes/capacity")
    cfg = replace(
        cfg,
        types=types,
        engine=_section(EngineConfig, raw.get("engine", {}), "engine"),
        image=_section(ImageConfig, raw.get("image", {}), "image"),
        network=_section(NetworkConfig, _tuples(raw.get("network", {})), "network"),
        desktop=_desktop(raw.get("desktop", {})),
        pool=_section(PoolConfig, raw.get("pool", {}), "pool"),
    )
    env = os.environ
    if "PADDOCKD_PORT" in env:
        cfg = replace(cfg, port=int(env["PADDOCKD_PORT"]))
    if "PADDOCKD_HOST" in env:
        cfg = replace(cfg, host=env["PADDOCKD_HOST"])
    if "PADDOCKD_UPSTREAM_DNS" in env:
        upstream = tuple(env["PADDOCKD_UPSTREAM_DNS"].split(","))
        cfg = replace(cfg, network=replace(cfg.network, upstream_dns=upstream))
    check(cfg)
    return cfg


def check(cfg: Config) -> None:
    """Refuse what no server can run with (ValueError, saying which setting): the file's
    values, and the owner's changes (settings.py) before they apply."""
    try:
        policy(cfg.network.default_mode, cfg.network.default_allow)
    except InvalidRequest as exc:
        raise ValueError(f"[network] default policy: {exc.message}") from None
    for opened in cfg.network.open_ranges:
        entry = policy("allowlist", [opened]).ranges
        if not entry or any(
            ipaddress.IPv4Network(entry[0]).overlaps(ipaddress.IPv4Network(m)) for m in METADATA
        ):
            raise ValueError(
                f"[network] open_ranges: {opened!r} is not an IPv4 range that may be opened "
                "(cloud metadata never is)"
            )
    if cfg.network.bridge and (len(cfg.network.bridge) > 15 or not cfg.network.bridge_cidr):
        raise ValueError("[network] bridge needs a name of at most 15 characters and a bridge_cidr")
    if cfg.public_url:
        check_url(cfg.public_url)
    if cfg.default_type not in cfg.types:
        raise ValueError(f"default_type {cfg.default_type!r} is not a configured type")
    _check_pool(cfg)
    _check_capacity(cfg)
    retry = cfg.webhook_retry_seconds
    if isinstance(retry, bool) or not isinstance(retry, int | float) or not 0 < retry <= 3600:
        raise ValueError(f"webhook_retry_seconds = {retry!r} is not a number of 0-3600 seconds")


def check_url(url: str) -> None:
    """The public URL as links need it: http(s), a host, a port that is a port."""
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError as exc:
        raise ValueError(f"public_url {url!r} is not a URL: {exc}") from None
    if split.scheme not in ("http", "https") or not split.hostname:
        raise ValueError(f"public_url {url!r}: give http(s)://HOST[:PORT]")
    if port == 0:
        raise ValueError(f"public_url {url!r}: port 0 is no port")
    if not url.isascii() or any(c.isspace() for c in url):
        raise ValueError(f"public_url {url!r}: an ASCII URL without spaces")


def _check_capacity(cfg: Config) -> None:
    numbers = {
        "cpus": cfg.capacity_cpus,
        "memory_mb": cfg.capacity_memory_mb,
        "cpu_overcommit": cfg.cpu_overcommit,
        "memory_reserve_mb": cfg.memory_reserve_mb,
    }
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"[capacity] {key} = {value!r} is not a number >= 0")
    if isinstance(cfg.memory_overcommit, bool) or not (
        isinstance(cfg.memory_overcommit, int | float) and 0 < cfg.memory_overcommit <= 100
    ):
        raise ValueError(
            f"[capacity] memory_overcommit = {cfg.memory_overcommit!r} is not a number "
            "above 0 and at most 100 (1: boxes may claim the host's memory once)"
        )


def _check_pool(cfg: Config) -> None:
    for name, size in (cfg.pool.types or {}).items():
        if name not in cfg.types:
            raise ValueError(f"[pool] types: {name!r} is not a configured type")
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"[pool] types: {name} = {size!r} is not a whole number >= 0")
    for name, size in cfg.pool.templates.items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"[pool] templates: {name} = {size!r} is not a whole number >= 0")
    if cfg.pool.max_boxes < 0 or cfg.pool.refill_delay < 0:
        raise ValueError("[pool] max_boxes and refill_delay cannot be negative")
