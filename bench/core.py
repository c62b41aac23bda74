"""Core benchmark: Paddock vs the raw box engine, same machine, same run.

    /opt/paddock/venv/bin/python -m bench.core [--runs 10]

Needs the box engine and image (./install.sh). Starts a paddockd of its own.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker
from tests.harness import ENGINE_SOCKET, IMAGE, PADDOCK, Server, free_subnet

from ._table import Row, median_seconds, print_table

DOCKER = shutil.which("docker") or "docker"
DOCKER_ENV = {**os.environ, "DOCKER_HOST": f"unix://{ENGINE_SOCKET}"}
LIMITS = ["--cpus", "1", "--memory", "1g", "--memory-swap", "1g", "--pids-limit", "1024"]


def sh(*args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout


def make_tree(root: Path) -> None:
    """One 50 MB file and 5,000 files of 10 KB: about 100 MB."""
    root.mkdir(parents=True)
    (root / "large.bin").write_bytes(os.urandom(50 * 1024 * 1024))
    for d in range(50):
        sub = root / f"d{d:02d}"
        sub.mkdir()
        for i in range(100):
            (sub / f"f{i:03d}.txt").write_bytes(os.urandom(10 * 1024))


def start_twin(api: docker.APIClient, srv: Server, name: str) -> None:
    """A running container made exactly as Paddock makes a box (runtime, capabilities,
    seccomp, limits, tmpfs, a volume for its Docker), but not a box: the raw side of rm."""
    with srv.client() as c:
        box = c.get_box("warm")
    host = api.inspect_container(f"paddock-{box.id}")["HostConfig"]
    volume = api.create_volume(f"{name}-docker")["Name"]
    config = api.create_host_config(
        runtime=host.get("Runtime"),
        cap_add=host.get("CapAdd"),
        security_opt=host.get("SecurityOpt"),
        nano_cpus=host.get("NanoCpus"),
        mem_limit=host.get("Memory"),
        memswap_limit=host.get("MemorySwap"),
        pids_limit=host.get("PidsLimit"),
        tmpfs=host.get("Tmpfs"),
        shm_size=host.get("ShmSize"),
        binds={volume: {"bind": "/var/lib/docker", "mode": "rw"}},
    )
    created = api.create_container(IMAGE, name=name, host_config=config, detach=True)
    api.start(created["Id"])


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--idle-boxes", type=int, default=20)
    args = parser.parse_args()
    runs = args.runs
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    srv = Server(work / "server")
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    raw_name = f"pdbench-{uuid.uuid4().hex[:6]}"
    rows: list[Row] = []
    try:
        # -- create -> exec-ready, from the shell -------------------------------------
        names = iter(f"bench-{i}" for i in range(10_000))

        def paddock_create() -> None:
            name = next(names)
            sh(PADDOCK, "new", "--name", name, "--ttl", "600", env=srv.env)
            sh(PADDOCK, "exec", name, "--", "true", env=srv.env)

        def paddock_cleanup() -> None:
            with srv.client() as c:
                for box in c.list_boxes():
                    c.delete_box(box.id, force=True)
            srv.deleted()  # the raw side's `docker rm -f` waits for its removal too

        def raw_create(*network: str) -> None:
            sh(DOCKER, "run", "-d", "--name", raw_name, *network, *LIMITS, IMAGE, env=DOCKER_ENV)
            sh(DOCKER, "exec", raw_name, "true", env=DOCKER_ENV)

        def raw_cleanup() -> None:
            sh(DOCKER, "rm", "-f", raw_name, env=DOCKER_ENV)

        # This server's boxes are on a bridge network of its own (a second server on the
        # engine needs one), where the engine sets up its DNS resolver in every box at
        # start (~35 ms); an installed server's are on the engine's default bridge, as
        # `docker run` is. The raw side is timed on both: on a network of the same kind,
        # the difference is Paddock's alone.
        subnet = str(ipaddress.ip_interface(free_subnet()).network)
        sh(DOCKER, "network", "create", "--subnet", subnet, raw_name, env=DOCKER_ENV)
        p = median_seconds(paddock_create, runs, teardown=paddock_cleanup)
        r = median_seconds(lambda: raw_create("--network", raw_name), runs, teardown=raw_cleanup)
        rows.append(
            Row("create -> exec-ready (CLI: new+exec)", p, r, "s", "ratio <= 1.5 (same network)")
        )
        r = median_seconds(raw_create, runs, teardown=raw_cleanup)
        rows.append(Row("  ... raw on the engine's default bridge", p, r, "s", "report"))

        # -- exec true: warm SDK vs docker-py ------------------------------------------
        srv.cli("new", "--name", "warm", "--ttl", "3600", check=True)
        sh(DOCKER, "run", "-d", "--name", raw_name, *LIMITS, IMAGE, env=DOCKER_ENV)
        with srv.client() as c:
            c.exec("warm", ["true"])
            p = median_seconds(lambda: c.exec("warm", ["true"]), runs * 5)

        def raw_exec() -> None:
            exec_id = api.exec_create(raw_name, ["true"], user="abc")["Id"]
            api.exec_start(exec_id)
            api.exec_inspect(exec_id)

        r = median_seconds(raw_exec, runs * 5)
        rows.append(Row("exec true (warm SDK vs docker-py)", p, r, "s", "ratio <= 1.5"))

        p = median_seconds(lambda: sh(PADDOCK, "exec", "warm", "--", "true", env=srv.env), runs * 2)
        r = median_seconds(lambda: sh(DOCKER, "exec", raw_name, "true", env=DOCKER_ENV), runs * 2)
        rows.append(Row("exec true (CLI vs docker CLI)", p, r, "s", "ratio <= 1.5"))
        # The same with each command in its own interpreter (no resident: docs/cli.md).
        alone = {**srv.env, "PADDOCK_RESIDENT": "0"}
        p = median_seconds(lambda: sh(PADDOCK, "exec", "warm", "--", "true", env=alone), runs * 2)
        rows.append(Row("  ... without the resident CLI process", p, r, "s", "report"))
        p = median_seconds(lambda: sh(PADDOCK, "--version"), runs)
        rows.append(Row("paddock --version", p, None, "s", "< 150 ms"))

        # -- rm of a running box vs docker rm -f of its twin ---------------------------
        rm_names = iter(f"rm-{i}" for i in range(10_000))
        twin = f"{raw_name}-twin"
        doomed: list[str] = []

        def paddock_rm_setup() -> None:
            doomed.append(next(rm_names))
            srv.cli("new", "--name", doomed[-1], "--ttl", "600", check=True)

        def paddock_rm() -> None:
            sh(PADDOCK, "rm", "--force", doomed[-1], env=srv.env)

        def twin_setup() -> None:
            start_twin(api, srv, twin)

        p = median_seconds(paddock_rm, runs, setup=paddock_rm_setup)
        r = median_seconds(
            lambda: sh(DOCKER, "rm", "-f", "-v", twin, env=DOCKER_ENV), runs, setup=twin_setup
        )
        rows.append(
            Row("rm a running box (CLI vs docker rm -f, same kind)", p, r, "s", "ratio <= 1.2")
        )

        # -- push / pull throughput ----------------------------------------------------
        tree = work / "tree"
        make_tree(tree)
        # A copy's time here swings 2x from run to run on either side (the host's writeback
        # of the run before): five runs at least, so the median is not one slow run's.
        copies = max(5, runs)
        mb = tree_bytes(tree) / 1e6
        clean_box = "rm -rf /config/tree && mkdir -p /config/tree && sync"

        def clear() -> None:
            srv.cli("exec", "-u", "root", "warm", "--", "sh", "-c", clean_box, check=True)
            sh(DOCKER, "exec", raw_name, "sh", "-c", clean_box, env=DOCKER_ENV)

        p = median_seconds(
            lambda: sh(PADDOCK, "push", "warm", str(tree), "--to", "/config/tree", env=srv.env),
            copies,
            setup=clear,
        )
        r = median_seconds(
            lambda: sh(DOCKER, "cp", f"{tree}/.", f"{raw_name}:/config/tree", env=DOCKER_ENV),
            copies,
            setup=clear,
        )
        rows.append(
            Row("push 100 MB tree, throughput", mb / p, mb / r, "MB/s", "ratio >= 0.8", True)
        )

        out = work / "out"

        def clear_out() -> None:
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()

        p = median_seconds(
            lambda: sh(PADDOCK, "pull", "warm", "/config/tree", "--to", str(out), env=srv.env),
            copies,
            setup=clear_out,
        )
        r = median_seconds(
            lambda: sh(DOCKER, "cp", f"{raw_name}:/config/tree", str(out), env=DOCKER_ENV),
            copies,
            setup=clear_out,
        )
        rows.append(
            Row("pull 100 MB tree, throughput", mb / p, mb / r, "MB/s", "ratio >= 0.8", True)
        )

        # -- idle RSS with N boxes -------------------------------------------------------
        with srv.client() as c:
            for i in range(args.idle_boxes - 1):
                c.create_box(f"idle-{i}", ttl=600)
            time.sleep(3)
        assert srv.proc is not None
        status = Path(f"/proc/{srv.proc.pid}/status").read_text()
        rss_kb = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")))
        rows.append(
            Row(
                f"paddockd RSS idle with {args.idle_boxes} boxes",
                rss_kb / 1024,
                None,
                "MiB",
                "report",
            )
        )
    finally:
        for leftover in (raw_name, f"{raw_name}-twin"):
            subprocess.run(
                [DOCKER, "rm", "-f", "-v", leftover], env=DOCKER_ENV, capture_output=True
            )
        subprocess.run([DOCKER, "network", "rm", raw_name], env=DOCKER_ENV, capture_output=True)
        # The twin's Docker volume is a named one: `rm -v` leaves it.
        subprocess.run(
            [DOCKER, "volume", "rm", f"{raw_name}-twin-docker"], env=DOCKER_ENV, capture_output=True
        )
        srv.close()
        shutil.rmtree(work, ignore_errors=True)
    print_table(
        f"Paddock core vs raw engine (median of >= {runs} runs; {os.cpu_count()} CPUs)", rows
    )


if __name__ == "__main__":
    main()
