"""Box state benchmark: snapshots, stops, restores and forks, against the physical limit
(a reflink copy of the same disk image, on the engine's own filesystem) and the raw
engine (`docker stop`, `docker start`) in the same run; Docker inside a box.

    /opt/paddock/venv/bin/python -m bench.state [--runs 3]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
from tests.harness import DRIVES, ENGINE_SOCKET, IMAGE, Server, free_subnet

from paddock import Client
from paddockd.runtime import diskcopy

from ._table import Row, median_seconds, print_table

DOCKER = shutil.which("docker") or "docker"
ENV = {**os.environ, "DOCKER_HOST": f"unix://{ENGINE_SOCKET}"}
RAW_LIMITS = ("--cpus", "1", "--memory", "1g")
DISKS = DRIVES.root.parent / "paddock-disks"
# The same file rewritten each round: "N MB changed" since the box was made.
WRITE = "head -c {mb}M /dev/urandom > /config/blob && sync"
BUSYBOX = (
    "for i in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.1; done; "
    "mkdir -p ~/bb && cp /bin/busybox ~/bb/ && printf 'FROM scratch\\nCOPY busybox /bin/busybox\\n"
    'RUN ["/bin/busybox", "--install", "-s", "/bin"]\\n\' > ~/bb/Dockerfile && '
    "docker build -q -t bb ~/bb"
)


def docker_cli(*args: str) -> str:
    return subprocess.run(
        [DOCKER, *args], check=True, capture_output=True, text=True, env=ENV
    ).stdout


def disk_image(c: Client, box: str) -> Path:
    """The box's disk image on the engine's filesystem (runtime/boxdisk.py)."""
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    cid = str(api.inspect_container(f"paddock-{c.get_box(box).id}")["Id"])
    return DISKS / f"{cid}.ext4"


def reflink_copy(image: Path, runs: int) -> float:
    """The physical limit: a reflink copy of the box's disk image, made and removed."""
    copy = image.with_name("bench-reflink.ext4")

    def once() -> None:
        diskcopy.clone(image, copy)

    try:
        return median_seconds(once, runs, teardown=lambda: copy.unlink(missing_ok=True))
    finally:
        copy.unlink(missing_ok=True)


def used_bytes() -> int:
    st = os.statvfs(DISKS)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = args.runs
    # No disk rate cap: the figures are the copies', not a 1 GB write at 50 MB/s.
    srv = Server(Path(tempfile.mkdtemp(prefix="paddock-bench-")) / "server", disk_mbps_per_cpu=0)
    raw = f"pdbench-{uuid.uuid4().hex[:6]}"
    rows: list[Row] = []
    try:
        with srv.client() as c:
            c.create_box("st", ttl=3600)
            snapshot_rows(c, rows, runs)
            # The raw container boots a whole desktop: started only for the rows that
            # compare with it, so its boot does not weigh on the rows before.
            # On a bridge network of its own, as this server's boxes are (bench/core.py
            # says why); the default bridge's figure is the resume row's report.
            docker_cli(
                "network",
                "create",
                "--subnet",
                str(ipaddress.ip_interface(free_subnet()).network),
                raw,
            )
            docker_cli("run", "-d", "--name", raw, "--network", raw, *RAW_LIMITS, IMAGE)
            stop_rows(c, rows, runs, raw)
            fork_rows(srv, c, rows, runs)
            space_row(c, rows)
            c.exec("st", BUSYBOX)
            inner = median_seconds(
                lambda: c.exec("st", "docker run --rm --pull never bb true"), runs
            )
            docker_cli("tag", IMAGE, "pdbench-host:latest")
            host = median_seconds(
                lambda: docker_cli(
                    "run", "--rm", "--pull", "never", "--entrypoint", "true", "pdbench-host:latest"
                ),
                runs,
            )
            rows.append(
                Row("docker run --rm inside a box vs on the host", inner, host, "s", "report")
            )
    finally:
        for name in (raw, f"{raw}-default"):
            subprocess.run([DOCKER, "rm", "-f", name], env=ENV, capture_output=True)
        subprocess.run([DOCKER, "network", "rm", raw], env=ENV, capture_output=True)
        subprocess.run([DOCKER, "rmi", "-f", "pdbench-host:latest"], env=ENV, capture_output=True)
        srv.close()
    print_table(
        f"Paddock box state vs the physical limit and the raw engine (median of {runs} runs; "
        f"{os.cpu_count()} CPUs; 'raw engine' = reflink copy of the same image unless named)",
        rows,
    )


def snapshot_rows(c: Client, rows: list[Row], runs: int) -> None:
    taken: dict[int, float] = {}
    for mb in (10, 1024):
        c.exec("st", WRITE.format(mb=mb))
        taken[mb] = median_seconds(lambda: c.snapshot_box("st"), runs)
        limit = reflink_copy(disk_image(c, "st"), runs)
        rows.append(
            Row(f"snapshot of a running box, {mb} MB changed", taken[mb], limit, "s", "<= 300 ms")
        )
    rows.append(
        Row("  ... 1 GB changed vs 10 MB changed", taken[1024], taken[10], "s", "ratio <= 1.5")
    )
    snaps = c.list_snapshots("st")
    restore = median_seconds(lambda: c.restore_box("st", snaps[0].id), runs)
    rows.append(
        Row(
            "restore, 1 GB snapshot, to a running box",
            restore,
            reflink_copy(disk_image(c, "st"), runs),
            "s",
            "<= 500 ms",
        )
    )


def stop_rows(c: Client, rows: list[Row], runs: int, raw: str) -> None:
    c.exec("st", WRITE.format(mb=1024))
    p = median_seconds(lambda: c.stop_box("st"), runs, setup=lambda: c.resume_box("st"))
    r = median_seconds(
        lambda: docker_cli("stop", "-t", "3", raw), runs, setup=lambda: docker_cli("start", raw)
    )
    rows.append(Row("stop (with snapshot), 1 GB changed vs docker stop", p, r, "s", "ratio <= 1.5"))
    # The same box's container stopped by the engine alone: what the snapshot adds.
    c.resume_box("st")
    box_container = f"paddock-{c.get_box('st').id}"
    e = median_seconds(
        lambda: docker_cli("stop", "-t", "3", box_container),
        runs,
        setup=lambda: (docker_cli("start", box_container), time.sleep(1)),
    )
    rows.append(Row("  ... vs docker stop of the box's own container", p, e, "s", "report"))
    c.resume_box("st")
    p = median_seconds(lambda: c.resume_box("st"), runs, setup=lambda: c.stop_box("st"))
    r = median_seconds(
        lambda: docker_cli("start", raw), runs, setup=lambda: docker_cli("stop", "-t", "3", raw)
    )
    rows.append(Row("resume vs docker start (same network)", p, r, "s", "ratio <= 1.2"))
    default = f"{raw}-default"
    docker_cli("run", "-d", "--name", default, *RAW_LIMITS, IMAGE)
    r = median_seconds(
        lambda: docker_cli("start", default),
        runs,
        setup=lambda: docker_cli("stop", "-t", "3", default),
    )
    docker_cli("rm", "-f", default)
    rows.append(Row("  ... raw on the engine's default bridge", p, r, "s", "report"))
    docker_cli("start", raw)
    r = median_seconds(
        lambda: (docker_cli("kill", raw), docker_cli("start", raw)),
        runs,
    )
    rows.append(Row("  (the engine's floor of a restore: kill + start)", r, None, "s", "report"))


def fork_rows(srv: Server, c: Client, rows: list[Row], runs: int) -> None:
    c.resume_box("st")
    c.exec("st", WRITE.format(mb=1024))
    names = iter(f"fk-{i}" for i in range(1000))
    forks: list[str] = []

    def fork() -> None:
        forks.append(c.fork_box("st", next(names)).name)
        c.exec(forks[-1], "true")

    def unfork() -> None:
        c.delete_box(forks.pop(), force=True)
        srv.deleted()  # its removal is no part of the next fork's time

    p = median_seconds(fork, runs, teardown=unfork)
    limit = reflink_copy(disk_image(c, "st"), runs)
    rows.append(Row("fork of a running box, 1 GB changed, exec-ready", p, limit, "s", "<= 1.0 s"))

    prefixes = iter(f"fm{i}" for i in range(1000))
    made: list[str] = []

    def ten() -> None:
        made.extend(b.name for b in c.fork_boxes("st", 10, next(prefixes)))
        with ThreadPoolExecutor(10) as pool:  # each fork's first exec, as ten agents would
            list(pool.map(lambda name: c.exec(name, "true"), made))

    def clean() -> None:
        while made:
            c.delete_box(made.pop(), force=True)
        srv.deleted()

    p = median_seconds(ten, max(1, runs - 1), teardown=clean)
    rows.append(Row("10 forks at once, all exec-ready", p, None, "s", "<= 4 s"))


def space_row(c: Client, rows: list[Row]) -> None:
    c.create_box("sp", ttl=3600)
    time.sleep(1)
    before = used_bytes()
    c.exec("sp", WRITE.format(mb=1024))
    for _ in range(20):
        c.snapshot_box("sp")
    grown = used_bytes() - before
    rows.append(
        Row(
            "1 GB written + 20 snapshots, engine disk used",
            grown / 1e9,
            None,
            "GB",
            "<= 1.1 GB",
        )
    )
    c.delete_box("sp", force=True)


if __name__ == "__main__":
    main()
