"""A real paddockd of its own (data dir, port, instance label) on the machine's box engine,
and the real CLI pointed at it. Shared by the integration tests and the benchmarks."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker

from paddock import Client
from paddock.wire.keys import e2b_key
from paddockd.runtime.drivefs import DriveFs

# The server and CLI as install.sh installed them (scripts/test says where); the tests'
# own venv holds the test tools beside the same code.
BIN = Path(os.environ.get("PADDOCK_SERVER_VENV") or Path(sys.executable).parent.parent) / "bin"
PADDOCKD = str(BIN / "paddockd")
PADDOCK = str(BIN / "paddock")
ENGINE_SOCKET = "/run/paddock/docker.sock"
IMAGE = "paddock-box:latest"
ROOT = Path(__file__).resolve().parents[1]
# Where the engine's sized drives live (paddockd's default data root).
DRIVES = DriveFs(Path("/var/lib/paddock/engine/paddock-drives"))


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    """Until `predicate` holds (what finishes in the background, e.g. a deleted box's
    container and storage, which go after `rm` answers)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.1)


def free_subnet() -> str:
    """A /24 in 10.214.0.0/16 that no interface of this machine uses yet; as the
    gateway's address/prefix."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for third in random.sample(range(1, 255), 254):
        if f" 10.214.{third}." not in used:
            return f"10.214.{third}.1/24"
    raise RuntimeError("no free test subnet in 10.214.0.0/16")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def e2b_env(server: Server) -> dict[str, str]:
    """What points the official e2b SDKs at `server`: what `paddock e2b env` prints, as
    docs/e2b.md says to use it (so the SDK suites test the command too). E2B_DOMAIN names
    no real host, so nothing can leave for E2B's cloud."""
    found = json.loads(server.cli("e2b", "env", "--with-token", "--json", check=True).stdout)
    assert found["E2B_SANDBOX_URL"] == server.url + "/e2b/sandbox"
    assert found["E2B_DOMAIN"] == "paddock.invalid"
    assert found["E2B_API_KEY"] == e2b_key(server.token)  # the form every SDK version takes
    return dict(found)


@contextlib.contextmanager
def e2b_python_env(server: Server) -> Iterator[dict[str, str]]:
    """The Python SDK reads its settings from this process's environment: set for the
    block, then as it was. A dead proxy catches any call that would leave the machine."""
    dead = f"http://127.0.0.1:{free_port()}"
    env = {
        **e2b_env(server),
        "E2B_HTTP_VERSION": "1.1",
        "HTTPS_PROXY": dead,
        "HTTP_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value).replace("'", '"')


class Server:
    def __init__(self, workdir: Path, **settings: object) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.instance = f"itest-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = self.dir / "paddockd.toml"
        server = {"port": self.port, "instance": self.instance, "data_dir": str(self.dir / "data")}
        boxes = {"reap_interval": 0.5, "reconcile_interval": 2.0, "stop_timeout": 3}
        capacity = {"cpus": 64, "memory_mb": 65536}
        # Each server's DNS filter needs a port of its own; the upstream is the tests' stub.
        network: dict[str, object] = {
            "dns_port": free_port(),
            "gateway_port": free_port(),
            "gateway_intercept_port": free_port(),
        }
        # A bridge of its own: the bridge guard locks every port of a bridge to boxes of
        # the one server that owns it.
        self.bridge = f"pdt{uuid.uuid4().hex[:8]}"
        cidr = free_subnet()
        self.gateway = cidr.split("/")[0]
        network.update(bridge=self.bridge, bridge_cidr=cidr)
        if "upstream_dns" in settings:
            network["upstream_dns"] = [settings.pop("upstream_dns")]
        engine: dict[str, object] = {}
        # No warm pool unless a test asks (pool_types={"small": 2}): ready boxes would
        # load the machine and show up among a test's containers.
        pool: dict[str, object] = {"max_boxes": 0}
        if "pool_types" in settings:
            pool["max_boxes"] = 4
        # Box types of the test's own: types={"tiny": {"cpus": 1, ..., "disk_mb": 128}}.
        types = dict(settings.pop("types", {}))  # type: ignore[call-overload]
        for key, value in settings.items():
            prefix = key.split("_")[0]
            section = {
                "capacity": capacity,
                "engine": engine,
                "pool": pool,
                "network": network,
            }.get(prefix, boxes)
            section[key.removeprefix(f"{prefix}_") if section is not boxes else key] = value
        lines = []
        sections = (("server", server), ("boxes", boxes), ("capacity", capacity))
        sections += (("engine", engine), ("network", network), ("pool", pool))
        sections += tuple((f"types.{name}", spec) for name, spec in types.items())
        for name, section in sections:
            lines.append(f"[{name}]")
            lines += [f"{k} = {_toml(v)}" for k, v in section.items()]
        self.config.write_text("\n".join(lines) + "\n")
        # Where this server keeps sized volumes' filesystems (its engine data root's).
        data_root = engine.get("data_root")
        self.drives = DriveFs(Path(str(data_root)) / "paddock-drives") if data_root else DRIVES
        self.token = subprocess.run(
            [PADDOCKD, "--config", str(self.config), "token", "create", "--name", "itest"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        self.cli_config = self.dir / "cli.json"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PADDOCK_URL": self.url,
            "PADDOCK_TOKEN": self.token,
            "PADDOCK_CONFIG": str(self.cli_config),
        }

    def start(self, fault: str | None = None) -> None:
        """Start paddockd; with `fault`, armed to kill itself at that point (faults.py)."""
        log = open(self.dir / "paddockd.log", "ab")  # noqa: SIM115 - lives as long as the process
        env = {k: v for k, v in os.environ.items() if k != "PADDOCKD_FAULT"}
        if fault:
            env["PADDOCKD_FAULT"] = fault
        self.proc = subprocess.Popen(
            [PADDOCKD, "--config", str(self.config), "serve"],
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(
            f"paddockd did not start:\n{(self.dir / 'paddockd.log').read_text()[-3000:]}"
        )

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def died(self, timeout: float = 30) -> bool:
        """Whether paddockd is gone within `timeout` seconds (an armed fault fired)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    @property
    def table(self) -> str:
        """This server's nftables tables' name (in the inet, bridge and arp families)."""
        return "paddock_" + self.instance.replace("-", "_")

    def client(self) -> Client:
        return Client(url=self.url, token=self.token)

    def cli_argv(self, *args: str) -> list[str]:
        return [PADDOCK, *args]

    def cli(
        self,
        *args: str,
        stdin: bytes | None = None,
        check: bool = False,
        timeout: float = 300,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [PADDOCK, *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            input=stdin.decode() if stdin is not None else None,
            # No stdin unless given: `paddock exec` forwards a pipe's, as ssh does.
            stdin=subprocess.DEVNULL if stdin is None else None,
            text=True,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"paddock {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
            )
        return done

    def sh(self, box: str, script: str, user: str = "abc") -> str:
        """Run a bash script in a box; its stdout (fails the test on a non-zero exit)."""
        return self.cli("exec", "-u", user, box, "--", "bash", "-c", script, check=True).stdout

    def containers(self) -> list[dict[str, object]]:
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        return list(
            api.containers(all=True, filters={"label": f"paddock.instance={self.instance}"})
        )

    def deleted(self, timeout: float = 60.0) -> None:
        """Until the boxes deleted so far have lost their containers: `rm` answers first,
        and a measurement must not pay for the removal of the run before it."""

        def done() -> bool:
            with self.client() as c:
                live = {b.id for b in c.list_boxes()}
            for container in self.containers():
                labels = container.get("Labels")
                assert isinstance(labels, dict)
                if labels.get("paddock.box") not in live and not labels.get("paddock.pool"):
                    return False
            return True

        wait_for(done, timeout, "the deleted boxes' containers to go")

    def close(self) -> None:
        hung = False
        if self.proc and self.proc.poll() is None:
            with self.client() as c:
                for box in c.list_boxes():
                    # Best effort; the check in the `server` fixture reports leftovers.
                    with contextlib.suppress(Exception):
                        c.delete_box(box.id, force=True)
            # rm answers before the engine's removal, which paddockd finishes before it
            # exits: waited for here, so that its exit is not timed against a busy engine.
            with contextlib.suppress(Exception):
                self.deleted()
            self.proc.terminate()
            try:
                # paddockd's own shutdown is bounded (connections 10 s, cleanups 2 x 20 s).
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                hung = True
        api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
        volumes = []
        for c in self.containers():
            # A box's own Docker volume has no labels; the warm pool's boxes leave theirs.
            volumes += [m["Name"] for m in c.get("Mounts") or () if m.get("Type") == "volume"]
            with contextlib.suppress(docker.errors.NotFound):  # its removal finished meanwhile
                api.remove_container(c["Id"], force=True)
        # A box's run folder is a tmpfs paddockd mounts (runtime/runfs.py): a container
        # removed here by the engine alone (the warm pool's) leaves its own mounted.
        for run in (self.dir / "data" / "boxes").glob("*/run"):
            if os.path.ismount(run):
                subprocess.run(["umount", "--lazy", str(run)], capture_output=True)
        for name in volumes:
            if name.startswith("paddock-box-"):
                with contextlib.suppress(docker.errors.APIError):
                    api.remove_volume(name, force=True)
                    self.drives.remove(name)  # a sized one's filesystem
        # Its saved disks (snapshots' copies): the folder is this instance's alone.
        shutil.rmtree(self.drives.root.parent / "paddock-disks" / "saved" / self.instance, True)
        # This server's own nftables table: its sets name box addresses that later boxes
        # of other servers may get.
        for family in ("inet", "bridge", "arp"):
            subprocess.run(["nft", "delete", "table", family, self.table], capture_output=True)
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_network(f"paddock-{self.bridge}")
        for volume in (
            api.volumes(filters={"label": f"paddock.instance={self.instance}"})["Volumes"] or []
        ):
            with contextlib.suppress(docker.errors.APIError):
                api.remove_volume(volume["Name"], force=True)
                self.drives.remove(volume["Name"])  # a sized drive's filesystem
        if hung:
            # Cleaned up all the same, then said: a shutdown past its bounds is a defect.
            raise RuntimeError(f"paddockd ({self.dir}) did not exit within 60 s of SIGTERM")
