"""Paddock's own dockerd ("the box engine"): its bridge, its flags, starting and stopping it.

It never touches a Docker the user already runs: own data root, exec root, socket,
pidfile and bridge; `--iptables=false` because Paddock owns its network rules. The bridge
is created here, before the engine starts, because dockerd with `--bridge=none` would
delete the host's docker0.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..config import EngineConfig
from ..domain.errors import EngineUnavailable
from . import datafs, oci

# The OCI runtime boxes use under the `userns` profile (see runtime/oci.py).
RUNTIME_NAME = "paddock-runc"


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=2)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(2)
        sock.connect(self._path)
        self.sock = sock


def is_running(cfg: EngineConfig) -> bool:
    try:
        conn = _UnixHTTPConnection(cfg.socket)
        conn.request("GET", "/_ping")
        return conn.getresponse().status == 200
    except OSError:
        return False


def userns_base(user: str, subuid: Path = Path("/etc/subuid")) -> int | None:
    """First host uid of the range the engine maps box root to."""
    try:
        for line in subuid.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == user:
                return int(rest.split(":")[0])
    except (OSError, ValueError):
        return None
    return None


def daemon_args(cfg: EngineConfig, config_file: Path) -> list[str]:
    return [
        cfg.dockerd,
        f"--config-file={config_file}",
        f"--data-root={cfg.data_root}",
        f"--exec-root={cfg.exec_root}",
        f"--host=unix://{cfg.socket}",
        f"--pidfile={cfg.pidfile}",
        f"--bridge={cfg.bridge}",
        "--iptables=false",
        "--ip-masq=false",
        f"--userns-remap={cfg.userns_user}",
        f"--cgroup-parent={cfg.cgroup_parent}",
    ]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def ensure_bridge(cfg: EngineConfig) -> None:
    if _ip("link", "show", cfg.bridge).returncode != 0:
        created = _ip("link", "add", cfg.bridge, "type", "bridge")
        if created.returncode != 0:
            raise EngineUnavailable(f"cannot create bridge {cfg.bridge}: {created.stderr.strip()}")
    if cfg.bridge_cidr.split("/")[0] not in _ip("-4", "addr", "show", "dev", cfg.bridge).stdout:
        _ip("addr", "add", cfg.bridge_cidr, "dev", cfg.bridge)
    _ip("link", "set", cfg.bridge, "up")
    # Boxes reach the package registries through NAT; that needs forwarding.
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def prepare(cfg: EngineConfig) -> Path:
    """Everything the engine needs before it starts; returns its config file."""
    if userns_base(cfg.userns_user) is None:
        raise EngineUnavailable(
            f"no subordinate uid range for user {cfg.userns_user!r} in /etc/subuid; "
            "run ./install.sh (it creates the user and its range)"
        )
    for d in (cfg.data_root, cfg.exec_root, Path(cfg.pidfile).parent, Path(cfg.log_file).parent):
        Path(d).mkdir(parents=True, exist_ok=True)
    datafs.ensure(cfg)
    ensure_bridge(cfg)
    # An explicit, empty-ish config file so /etc/docker/daemon.json (the system Docker's)
    # never leaks into the box engine.
    config_file = Path(cfg.data_root).parent / "engine.json"
    wrapper = write_wrapper(cfg)
    settings = {
        "log-driver": "json-file",
        "log-opts": {"max-size": "10m"},
        "runtimes": {RUNTIME_NAME: {"path": str(wrapper)}},
    }
    config_file.write_text(json.dumps(settings))
    return config_file


def write_wrapper(cfg: EngineConfig) -> Path:
    """(Re)write the OCI wrapper the engine runs boxes with. The engine runs it afresh for
    each box start, so a running engine takes a new one at once (an upgrade of paddockd,
    a kernel that can now idmap)."""
    wrapper = Path(cfg.data_root).parent / "bin" / RUNTIME_NAME
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    tmp = wrapper.with_name(wrapper.name + ".new")
    tmp.write_text(oci.wrapper_script(sys.executable, wrapper_settings(cfg)))
    tmp.chmod(0o755)
    tmp.replace(wrapper)
    return wrapper


def identity_state(cfg: EngineConfig) -> Path:
    """Where the last engine start wrote whether boxes get identities of their own."""
    return Path(cfg.data_root).parent / "bin" / f"{RUNTIME_NAME}.identities"


def wrapper_settings(cfg: EngineConfig) -> oci.Settings:
    """The OCI wrapper's settings, with box identities where the kernel can idmap (the
    probe runs in a process of its own: it forks, and paddockd has threads)."""
    run = Path(cfg.exec_root).parent
    why = "turned off in the configuration ([engine] box_identities)"
    if cfg.box_identities:
        probe = subprocess.run(
            [sys.executable, "-m", "paddockd.runtime.oci", "probe"],
            capture_output=True,
            text=True,
        )
        why = "" if probe.returncode == 0 else (probe.stdout or probe.stderr).strip()
    state = identity_state(cfg)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(f"off: {why}\n" if why else "on\n")
    return oci.Settings(
        identities=None if why else run / "identities",
        staging=run.parent / f"{run.name}-roots",
        data=(Path(cfg.data_root),),
    )


def run_foreground(cfg: EngineConfig) -> None:
    """Replace this process with dockerd (for systemd's ExecStart)."""
    with datafs.engine_lock(cfg):
        args = daemon_args(cfg, prepare(cfg))
    os.execvp(args[0], args)


def start_detached(cfg: EngineConfig, wait: float = 60.0) -> None:
    """Start dockerd in its own session (it outlives paddockd restarts) and wait for it."""
    if is_running(cfg):
        write_wrapper(cfg)
        return
    with datafs.engine_lock(cfg):
        if _start(cfg, wait):
            return
    tail = Path(cfg.log_file).read_text(errors="replace").splitlines()[-15:]
    raise EngineUnavailable(
        f"the box engine did not start within {wait:.0f}s; last lines of {cfg.log_file}:\n"
        + "\n".join(tail)
    )


def _start(cfg: EngineConfig, wait: float) -> bool:
    if is_running(cfg):  # another process started it while this one waited for the lock
        return True
    # An engine still shutting down keeps its pidfile, and a new one would refuse to start.
    _wait_for_exit(_pid(cfg), wait)
    args = daemon_args(cfg, prepare(cfg))
    with open(cfg.log_file, "ab") as log:
        daemon = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if is_running(cfg):
            return True
        if daemon.poll() is not None:
            return False  # it gave up: its log says why
        time.sleep(0.2)
    return False


def _pid(cfg: EngineConfig) -> int | None:
    try:
        return int(Path(cfg.pidfile).read_text().strip())
    except (OSError, ValueError):
        return None


def _wait_for_exit(pid: int | None, wait: float) -> bool:
    """True once `pid` is gone (or there was none), False if it outlived `wait`."""
    deadline = time.monotonic() + wait
    while pid is not None and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return pid is None or time.monotonic() < deadline


def stop(cfg: EngineConfig, wait: float = 30.0) -> bool:
    pid = _pid(cfg)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    return _wait_for_exit(pid, wait)
