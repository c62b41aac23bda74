"""Load benchmark: Paddock under parallel and sustained load, against the raw engine
driven with docker-py in the same run.

    /opt/paddock/venv/bin/python -m bench.load             # the full run (~20 min)
    /opt/paddock/venv/bin/python -m bench.load --quick     # a smoke run (~3 min)
    /opt/paddock/venv/bin/python -m bench.load --only density --density 500   # ~25 min

Phases: parallel creates, parallel exec streams (checksummed), sequential execs, parallel
pushes, density (idle boxes, with and without a desktop), and one long exec stream.
Density grows to --density boxes of a small type and measures at 50, 200 and 500 boxes
on the way: paddockd's idle CPU and RSS, `paddock ls` and `status`, and an exec and a new
box's create against the same with 5 boxes; then what a box costs the host.
Starts a paddockd of its own; every box and container it makes is named with a prefix
and removed at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
from tests.harness import ENGINE_SOCKET, IMAGE, PADDOCK, Server

from paddock import Client

from ._table import Row, median_seconds, print_table

T = TypeVar("T")
MiB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")
# stdout gets the bytes, stderr their sha256 as the box computed it: what arrived is
# checked against what was produced, not against a copy made on this side.
# The digest through a pipe of bash's own: a box user may not reopen the exec's stdout
# (/dev/fd/1: a pipe of the host's root, as with any engine's exec run as a user).
STREAM = "head -c {n} /dev/urandom | tee >(sha256sum >&2)"
# Paced (64 KiB every 0.1 s) so that a long stream measures stalls, not this machine's
# CPU; `timeout` ends the producer, and tee and sha256sum then finish the pipeline.
PACED = (
    "timeout {secs} bash -c "
    "'while :; do head -c 65536 /dev/urandom || exit; sleep 0.1; done' "
    "| tee >(sha256sum >&2)"
)
STALL_SECONDS = 1.0  # ten times the producer's pace
SETTLE_SECONDS = 5.0  # start-up of a box's services (its dockerd) or of a desktop
DENSITY_STEPS = (50, 200, 500)  # where density is measured on the way to --density
DENSITY_TYPE = {"cpus": 1, "memory_mb": 128, "pids": 512, "disk_mb": 2048}
DENSITY_BASE = 5  # boxes the latencies at each step are compared with
LATENCY_RUNS = 7


@dataclass
class Scale:
    creates: int
    streams: int
    stream_mb: int
    seq_execs: int
    pushes: int
    push_mb: int
    stream_minutes: float
    density: int
    idle_seconds: float


FULL = Scale(20, 50, 10, 200, 10, 50, 10.0, 50, 30.0)
QUICK = Scale(4, 8, 2, 40, 3, 10, 0.5, 8, 5.0)


@dataclass
class Outcome:
    """One operation: how long it took, how many bytes it moved, what went wrong."""

    seconds: float
    nbytes: int = 0
    error: str | None = None


@dataclass
class Usage:
    wall: float = 0.0
    cpu: float = 0.0
    peak_rss_mib: float = 0.0

    @property
    def cpu_pct(self) -> float:
        return 100 * self.cpu / self.wall if self.wall else 0.0


class Meter:
    """paddockd's CPU time and peak RSS while a phase runs, read from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.pid}/status").read_text()
        kb = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))
        return int(kb) / 1024

    def cpu_seconds(self) -> float:
        # comm (field 2) may hold spaces: fields are counted after its closing paren. Its
        # own time and that of the programs it ran (ip, losetup) and waited for.
        rest = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return sum(int(n) for n in rest[11:15]) / TICKS

    @contextlib.contextmanager
    def measure(self) -> Iterator[Usage]:
        usage = Usage(peak_rss_mib=self.rss_mib())
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                with contextlib.suppress(OSError, StopIteration):
                    usage.peak_rss_mib = max(usage.peak_rss_mib, self.rss_mib())

        sampler = threading.Thread(target=sample, daemon=True)
        cpu0, t0 = self.cpu_seconds(), time.perf_counter()
        sampler.start()
        try:
            yield usage
        finally:
            done.set()
            sampler.join()
            usage.wall = time.perf_counter() - t0
            usage.cpu = self.cpu_seconds() - cpu0
            usage.peak_rss_mib = max(usage.peak_rss_mib, self.rss_mib())


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest rank: with 20 samples, p99 is the slowest one."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def parallel(fn: Callable[[int], Outcome], n: int) -> tuple[list[Outcome], float]:
    """Run fn(0..n-1) on n threads released together; their outcomes and the wall time
    from the release to the last one's end."""
    gate = threading.Barrier(n + 1)

    def task(i: int) -> Outcome:
        gate.wait()
        start = time.perf_counter()
        try:
            out = fn(i)
        except Exception as exc:  # a failure is a figure here, not the end of the run
            return Outcome(time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
        out.seconds = time.perf_counter() - start
        return out

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(task, i) for i in range(n)]
        gate.wait()
        start = time.perf_counter()
        outcomes = [f.result() for f in futures]
    return outcomes, time.perf_counter() - start


def errors(outcomes: Sequence[Outcome]) -> list[str]:
    return [o.error for o in outcomes if o.error]


def ok_seconds(outcomes: Sequence[Outcome]) -> list[float]:
    return [o.seconds for o in outcomes if not o.error] or [math.nan]


def wait_for_engine(api: docker.APIClient, minutes: float = 10) -> None:
    """The engine may be restarting (a storage migration): wait rather than fail."""
    deadline = time.monotonic() + minutes * 60
    while True:
        try:
            api.ping()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            print("box engine not answering; waiting", flush=True)
            time.sleep(10)


def wide_subnet() -> str:
    """A /22 (1,022 boxes) in 10.215.0.0/16 that no interface of this machine uses yet,
    as the gateway's address/prefix (the tests' servers get a /24)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for first in range(0, 256, 4):
        if not any(f" 10.215.{first + k}." in used for k in range(4)):
            return f"10.215.{first}.1/22"
    raise RuntimeError("no free /22 in 10.215.0.0/16")


def median_of(fn: Callable[[], object], runs: int) -> float:
    return median_seconds(fn, runs)


def host_used_mib() -> float:
    """The host's memory in use: total less what the kernel counts available."""
    info = {
        line.split(":")[0]: int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
    }
    return (info["MemTotal"] - info["MemAvailable"]) / 1024


def shim_pss_mib(cids_or_ids: Sequence[str]) -> float:
    """The engine's per-container shim (containerd-shim-runc-v2) of these boxes, PSS in
    MiB, averaged over those found (a box's container name holds its id)."""
    wanted = set(cids_or_ids)
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}", version="auto")
    cids = {
        str(c["Id"])
        for c in api.containers(filters={"label": "paddock.box"})
        if c["Names"] and c["Names"][0].removeprefix("/paddock-") in wanted
    }
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"containerd-shim-runc-v2"):
                continue
            cid = argv[argv.index(b"-id") + 1].decode()
            if cid in cids:
                rollup = (proc / "smaps_rollup").read_text().splitlines()
                found.append(int(next(ln.split()[1] for ln in rollup if ln.startswith("Pss:"))))
    return statistics.mean(found) / 1024 if found else math.nan


def bridge_ports(bridge: str) -> int:
    return len(list(Path(f"/sys/class/net/{bridge}/brif").iterdir()))


def box_memory(api: docker.APIClient, container: str) -> tuple[float, float]:
    """RSS and PSS (MiB) summed over the container's own processes. RSS counts a library
    shared by several of them once per process; PSS splits it among them."""
    top = api.top(container)
    col = top["Titles"].index("PID")
    rss = pss = 0
    for proc in top["Processes"]:
        pid = proc[col]
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            rss += int(next(ln.split()[1] for ln in status if ln.startswith("VmRSS:")))
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            pss += int(next(ln.split()[1] for ln in rollup if ln.startswith("Pss:")))
    return rss / 1024, pss / 1024


class Raw:
    """The raw side: containers made exactly as Paddock makes a box (runtime,
    capabilities, seccomp, limits, tmpfs, a volume for its Docker), through docker-py."""

    def __init__(self, api: docker.APIClient, prefix: str, box: dict[str, Any]) -> None:
        self.api = api
        host = box["HostConfig"]
        # The profile decides whether the box's init starts its own dockerd: without it
        # the raw side would be a lighter container than a box.
        self.env = [e for e in box["Config"]["Env"] or [] if e.startswith("PADDOCK_PROFILE=")]
        self.prefix = prefix
        self.labels = {"paddock.bench": prefix}
        self.host: dict[str, Any] = {
            "runtime": host.get("Runtime"),
            "cap_add": host.get("CapAdd"),
            "security_opt": host.get("SecurityOpt"),
            "nano_cpus": host.get("NanoCpus"),
            "mem_limit": host.get("Memory"),
            "memswap_limit": host.get("MemorySwap"),
            "pids_limit": host.get("PidsLimit"),
            "tmpfs": host.get("Tmpfs"),
            "shm_size": host.get("ShmSize"),
        }

    def create(self, name: str, cpuset: str | None = None, runtime: str | None = None) -> str:
        """`cpuset`: the CPUs of the box this container twins (Paddock pins each box to
        CPUs of its own, so that `nproc` in it shows them; unpinned, the raw side would
        get the scheduler's free balancing that boxes do not). `runtime`: another than
        the box's."""
        name = f"{self.prefix}-{name}"
        volume = self.api.create_volume(f"{name}-docker", labels=self.labels)["Name"]
        config = self.api.create_host_config(
            **{**self.host, **({"runtime": runtime} if runtime else {})},
            binds={volume: {"bind": "/var/lib/docker", "mode": "rw"}},
            cpuset_cpus=cpuset or None,
        )
        cid = self.api.create_container(
            IMAGE,
            name=name,
            host_config=config,
            detach=True,
            labels=self.labels,
            environment=self.env,
        )["Id"]
        self.api.start(cid)
        return str(cid)

    def exec(self, cid: str, cmd: list[str], user: str = "abc") -> tuple[int, bytes, bytes]:
        exec_id = self.api.exec_create(cid, cmd, user=user)["Id"]
        out, err = self.api.exec_start(exec_id, demux=True)
        code = self.api.exec_inspect(exec_id)["ExitCode"]
        return int(code), out or b"", err or b""

    def remove(self, cid: str) -> None:
        with contextlib.suppress(docker.errors.APIError):
            self.api.remove_container(cid, force=True, v=True)

    def cleanup(self) -> None:
        """Everything labelled with this run's prefix, whatever phase it was left in."""
        filters = {"label": f"paddock.bench={self.prefix}"}
        for c in self.api.containers(all=True, filters=filters):
            self.remove(c["Id"])
        for volume in self.api.volumes(filters=filters).get("Volumes") or []:
            with contextlib.suppress(docker.errors.APIError):
                self.api.remove_volume(volume["Name"], force=True)


@dataclass
class Bench:
    srv: Server
    client: Client
    raw: Raw
    meter: Meter
    scale: Scale
    prefix: str
    rows: list[Row] = field(default_factory=list)
    boxes: list[str] = field(default_factory=list)
    raws: list[str] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)
    doomed: list[str] = field(default_factory=list)

    def add(self, *rows: Row) -> None:
        self.rows.extend(rows)

    def latency_rows(
        self, what: str, ours: Sequence[Outcome], theirs: Sequence[Outcome], p99_target: str
    ) -> None:
        mine, raw = ok_seconds(ours), ok_seconds(theirs)
        self.add(
            Row(f"{what}: p50", statistics.median(mine), statistics.median(raw), "s", "report"),
            Row(f"{what}: p99", percentile(mine, 99), percentile(raw, 99), "s", p99_target),
            Row(f"{what}: errors", len(errors(ours)), len(errors(theirs)), "n", "0"),
        )
        for e in (errors(ours) + errors(theirs))[:5]:
            print(f"  {what} error: {e}", flush=True)

    # -- 20 parallel `new` ------------------------------------------------------------
    def creates(self) -> None:
        n = self.scale.creates

        def ours(i: int) -> Outcome:
            self.client.create_box(f"{self.prefix}-c{i}", ttl=7200)
            return Outcome(0)

        def theirs(i: int) -> Outcome:
            self.raws.append(self.raw.create(f"c{i}", cpusets[i % len(cpusets)]))
            return Outcome(0)

        with self.meter.measure() as use:
            mine, _ = parallel(ours, n)
        self.usage[f"{n} parallel creates"] = use
        self.boxes = [
            f"{self.prefix}-c{i}" for i, o in enumerate(mine) if not o.error
        ]  # the later phases' boxes
        cpusets = [
            str(self.raw.api.inspect_container(f"paddock-{self.client.get_box(b).id}")
                ["HostConfig"].get("CpusetCpus") or "")
            for b in self.boxes
        ] or [""]  # fmt: skip
        raw, _ = parallel(theirs, n)
        self.latency_rows(f"{n} parallel new vs create+start", mine, raw, "p99 ratio <= 2")
        time.sleep(SETTLE_SECONDS)

    # -- 50 parallel exec streams of 10 MB ------------------------------------------------
    def streams(self) -> None:
        n, size = self.scale.streams, self.scale.stream_mb * MiB
        cmd = ["bash", "-c", STREAM.format(n=size)]

        def check(i: int, digest: str, nbytes: int, code: int | None, err: bytes) -> Outcome:
            told = err.decode(errors="replace").split()
            if code != 0 or nbytes != size or not told or told[0] != digest:
                return Outcome(0, nbytes, f"stream {i}: exit {code}, {nbytes} of {size} bytes")
            return Outcome(0, nbytes)

        def ours(i: int) -> Outcome:
            box = self.boxes[i % len(self.boxes)]
            sha, nbytes, err = hashlib.sha256(), 0, bytearray()
            stream = self.client.exec_stream(box, cmd)
            for kind, data in stream:
                if kind == "stdout":
                    sha.update(data)
                    nbytes += len(data)
                else:
                    err += data
            return check(i, sha.hexdigest(), nbytes, stream.exit_code, bytes(err))

        def theirs(i: int) -> Outcome:
            api, cid = self.raw.api, self.raws[i % len(self.raws)]
            sha, nbytes, err = hashlib.sha256(), 0, bytearray()
            exec_id = api.exec_create(cid, cmd, user="abc")["Id"]
            for out, more in api.exec_start(exec_id, stream=True, demux=True):
                if out:
                    sha.update(out)
                    nbytes += len(out)
                if more:
                    err += more
            code = api.exec_inspect(exec_id)["ExitCode"]
            return check(i, sha.hexdigest(), nbytes, code, bytes(err))

        # Two rounds a side, in the order ours, raw, raw, ours: on two shared cores the
        # machine's load drifts over a phase (boxes still booting, page cache), and a
        # side that always ran first or last would carry the drift as its figure.
        mine, raw, wall, raw_wall = [], [], 0.0, 0.0
        with self.meter.measure() as use:
            got, took = parallel(ours, n)
        mine, wall = mine + got, wall + took
        for _ in range(2):
            got, took = parallel(theirs, n)
            raw, raw_wall = raw + got, raw_wall + took
        with self.meter.measure() as use:
            got, took = parallel(ours, n)
        mine, wall = mine + got, wall + took
        self.usage[f"{n} exec streams"] = use
        what = f"{n} exec streams x {self.scale.stream_mb} MiB"
        self.add(
            Row(
                f"{what}: throughput",
                sum(o.nbytes for o in mine) / wall / 1e6,
                sum(o.nbytes for o in raw) / raw_wall / 1e6,
                "MB/s",
                "ratio >= 0.8",
                True,
            )
        )
        self.latency_rows(f"{what}, each", mine, raw, "report")
        lost = sum(size - o.nbytes for o in mine)
        raw_lost = sum(size - o.nbytes for o in raw)
        self.add(Row(f"{what}: bytes lost", lost, raw_lost, "n", "0 (sha256 both ends)"))

    # -- 200 sequential exec in one box -------------------------------------------------
    def sequential(self) -> None:
        n = self.scale.seq_execs
        box, cid = self.boxes[0], self.raws[0]

        def timed(fn: Callable[[], int]) -> Outcome:
            start = time.perf_counter()
            try:
                code = fn()
            except Exception as exc:
                return Outcome(time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
            took = time.perf_counter() - start
            return Outcome(took, error=None if code == 0 else f"exit {code}")

        self.client.exec(box, ["true"])  # the first exec of a box warms its connection
        with self.meter.measure() as use:
            mine = [timed(lambda: self.client.exec(box, ["true"]).exit_code) for _ in range(n)]
        self.usage[f"{n} sequential execs"] = use
        raw = [timed(lambda: self.raw.exec(cid, ["true"])[0]) for _ in range(n)]
        self.latency_rows(f"{n} sequential exec true", mine, raw, "report")

    # -- 10 boxes pushing 50 MB at once -------------------------------------------------
    def pushes(self, work: Path) -> None:
        n, size = min(self.scale.pushes, len(self.boxes), len(self.raws)), self.scale.push_mb
        blob = work / "load.bin"
        with blob.open("wb") as f:
            for _ in range(size):
                f.write(os.urandom(MiB))
        digest = hashlib.sha256(blob.read_bytes()).hexdigest()
        archive = work / "load.tar"
        with tarfile.open(archive, "w") as tar:
            info = tar.gettarinfo(str(blob), arcname="load.bin")
            info.uid = info.gid = 1000
            with blob.open("rb") as src:
                tar.addfile(info, src)
        check = ["sha256sum", "/config/load.bin"]

        def ours(i: int) -> Outcome:
            self.client.push(self.boxes[i], [blob], "/config/load.bin")
            return Outcome(0, size * MiB)

        # The engine's own copy cannot write into a container that has an identity of
        # its own, as a box and its twins here do ("lchown: value too large"): the raw
        # side pushes into twins on the engine's runc and its one remap of ids.
        targets = [self.raw.create(f"push{i}", runtime="runc") for i in range(n)]

        def theirs(i: int) -> Outcome:
            with archive.open("rb") as f:
                self.raw.api.put_archive(targets[i], "/config", f)
            return Outcome(0, size * MiB)

        def verify(outcomes: list[Outcome], run: Callable[[int], str]) -> None:
            for i, o in enumerate(outcomes):
                if not o.error and not run(i).startswith(digest):
                    o.error = f"push {i}: the file in the box has another sha256"

        with self.meter.measure() as use:
            mine, wall = parallel(ours, n)
        self.usage[f"{n} parallel pushes"] = use
        raw, raw_wall = parallel(theirs, n)
        verify(mine, lambda i: self.client.exec(self.boxes[i], check).stdout)
        verify(raw, lambda i: self.raw.exec(targets[i], check)[1].decode())
        for cid in targets:
            self.raw.remove(cid)
        what = f"{n} parallel push {size} MiB"
        self.add(
            Row(
                f"{what}: throughput",
                sum(o.nbytes for o in mine if not o.error) / wall / 1e6,
                sum(o.nbytes for o in raw if not o.error) / raw_wall / 1e6,
                "MB/s",
                "ratio >= 0.8",
                True,
            )
        )
        self.latency_rows(f"{what}, each", mine, raw, "report")

    # -- idle boxes for density, measured at each step -----------------------------------
    def density(self) -> None:
        # The raw containers would be counted as load on the machine: gone first.
        def drop(i: int) -> Outcome:
            self.raw.remove(self.raws[i])
            return Outcome(0)

        if self.raws:
            parallel(drop, len(self.raws))
        self.raws = []
        failed: list[str] = []
        self.grow(DENSITY_BASE, failed)
        base = self.latencies()
        count0, host0 = len(self.boxes), host_used_mib()
        steps = sorted({n for n in DENSITY_STEPS if n < self.scale.density} | {self.scale.density})
        for step in steps:
            self.grow(step, failed)
            count = len(self.boxes)
            time.sleep(SETTLE_SECONDS)
            with self.meter.measure() as use:
                time.sleep(self.scale.idle_seconds)
            exec_s, create_s, raw_s, raw_create_s, pooled_s = self.latencies()
            ls = median_of(lambda: self.cli("ls"), LATENCY_RUNS)
            status = median_of(lambda: self.cli("status"), LATENCY_RUNS)
            self.add(
                Row(f"{count} boxes idle: paddockd RSS", use.peak_rss_mib, None, "MiB", "<= 250"),
                Row(f"{count} boxes idle: paddockd CPU", use.cpu_pct, None, "% core", "<= 2"),
                Row(f"{count} boxes: paddock ls (CLI)", ls * 1000, None, "ms", "<= 150 ms"),
                Row(f"{count} boxes: paddock status (CLI)", status * 1000, None, "ms", "<= 150 ms"),
                Row(
                    f"{count} boxes: exec true vs with {DENSITY_BASE}",
                    exec_s * 1000,
                    base[0] * 1000,
                    "ms",
                    "ratio <= 1.2",
                ),
                Row(
                    f"  ... the engine's own (docker-py exec) vs with {DENSITY_BASE}",
                    raw_s * 1000,
                    base[2] * 1000,
                    "ms",
                    "report",
                ),
                Row(
                    f"{count} boxes: new + exec vs with {DENSITY_BASE}",
                    create_s * 1000,
                    base[1] * 1000,
                    "ms",
                    "ratio <= 1.2",
                ),
                Row(
                    f"  ... the engine's own (docker-py run + exec) vs with {DENSITY_BASE}",
                    raw_create_s * 1000,
                    base[3] * 1000,
                    "ms",
                    "report",
                ),
                Row(
                    f"{count} boxes: new + exec, warm pool, vs with {DENSITY_BASE}",
                    pooled_s * 1000,
                    base[4] * 1000,
                    "ms",
                    "ratio <= 1.2",
                ),
            )
        for e in failed[:5]:
            print(f"  density create error: {e}", flush=True)
        count = len(self.boxes)
        st = self.client.status()
        answered = self.all_answer()
        self.add(
            Row("density: boxes made (create errors)", count, len(failed), "n", "errors 0"),
            Row("density: boxes answering exec", answered, count, "n", "all"),
            Row(
                "host memory used per box (MemAvailable)",
                (host_used_mib() - host0) / max(count - count0, 1),
                None,
                "MiB",
                "report",
            ),
            Row("engine shim per box, PSS", shim_pss_mib(self.box_ids()), None, "MiB", "report"),
            Row(
                "next limit: memory claims (MiB used of total)",
                st.capacity.memory_used_mb,
                st.capacity.memory_total_mb,
                "MiB",
                "report",
            ),
            Row("next limit: bridge ports", bridge_ports(self.srv.bridge), 1024, "n", "report"),
        )
        self.idle_box_memory()

    def grow(self, to: int, failed: list[str]) -> None:
        """Boxes of the density type until there are `to`, ten at a time: a steady trickle
        (density is measured here, not create latency)."""
        while len(self.boxes) < to:
            k = min(10, to - len(self.boxes))
            names = [f"{self.prefix}-d{len(self.boxes) + j}" for j in range(k)]

            def make(j: int, names: list[str] = names) -> Outcome:
                self.client.create_box(names[j], box_type="dense", ttl=7200)
                return Outcome(0)

            outcomes, _ = parallel(make, k)
            failed += errors(outcomes)
            self.boxes += [nm for nm, o in zip(names, outcomes, strict=True) if not o.error]
            if len(failed) > 20:
                raise RuntimeError(f"density: {len(failed)} creates failed: {failed[-1]}")

    def latencies(self) -> tuple[float, float, float, float, float]:
        """Medians, at the density there is now, of an exec in a box made early (SDK, and
        docker-py into its container), of a new box's create and first exec (SDK, and
        docker-py's run and exec of a twin: what the engine alone does at this density),
        and of the same from a full warm pool."""
        box = self.boxes[0]
        exec_s = median_of(lambda: self.client.exec(box, ["true"]), LATENCY_RUNS)
        container = f"paddock-{self.client.get_box(box).id}"
        raw_s = median_of(lambda: self.raw.exec(container, ["true"]), LATENCY_RUNS)
        n = [0]

        def new_and_exec() -> None:
            n[0] += 1
            made = self.client.create_box(f"{self.prefix}-lat{n[0]}", box_type="dense", ttl=600)
            self.client.exec(made.name, ["true"])
            self.doomed.append(made.name)

        create_s = median_of(new_and_exec, LATENCY_RUNS)

        def claim_and_exec() -> None:
            n[0] += 1
            made = self.client.create_box(f"{self.prefix}-lat{n[0]}", box_type="pooled", ttl=600)
            self.client.exec(made.name, ["true"])
            self.doomed.append(made.name)

        pooled = []
        for _ in range(LATENCY_RUNS):
            self.pool_full()  # untimed: each sample is a claim of a ready box
            pooled.append(median_of(claim_and_exec, 1))
        pooled_s = statistics.median(pooled)
        for name in self.doomed:
            self.client.delete_box(name, force=True)
        self.doomed = []
        self.srv.deleted()  # their removal is no part of the next measurement
        twins: list[str] = []

        def raw_run_and_exec() -> None:
            twins.append(self.raw.create(f"lat{len(twins)}"))
            self.raw.exec(twins[-1], ["true"])

        raw_create_s = median_of(raw_run_and_exec, LATENCY_RUNS)
        for i, cid in enumerate(twins):
            self.raw.remove(cid)
            with contextlib.suppress(docker.errors.APIError):
                self.raw.api.remove_volume(f"{self.raw.prefix}-lat{i}-docker", force=True)
        return exec_s, create_s, raw_s, raw_create_s, pooled_s

    def pool_full(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pool = self.client.status().pool
            if pool is not None and all(t.ready == t.size for t in pool.types):
                return
            time.sleep(0.2)
        raise RuntimeError("the warm pool did not fill")

    def cli(self, *args: str) -> None:
        subprocess.run([PADDOCK, *args], check=True, capture_output=True, env=self.srv.env)

    def all_answer(self) -> int:
        def one(i: int) -> Outcome:
            code = self.client.exec(self.boxes[i], ["true"]).exit_code
            return Outcome(0, error=None if code == 0 else f"exit {code}")

        answered = 0
        for start in range(0, len(self.boxes), 20):
            outcomes, _ = parallel(lambda i, s=start: one(s + i), min(20, len(self.boxes) - start))
            answered += sum(not o.error for o in outcomes)
        return answered

    def box_ids(self) -> list[str]:
        return [b.id for b in self.client.list_boxes() if b.name.startswith(self.prefix)]

    def idle_box_memory(self) -> None:
        """A box no exec ever ran in, against its twin made through docker-py."""
        twin = self.raw.create("twin")
        time.sleep(SETTLE_SECONDS)
        box = self.client.get_box(self.boxes[-1])
        container = f"paddock-{box.id}"
        plain, raw_plain = box_memory(self.raw.api, container), box_memory(self.raw.api, twin)
        self.client.desktop_link(box.name)
        desktop_error = ""
        try:
            self.raw.exec(twin, ["paddock-desktop", "start"], user="root")
        except docker.errors.APIError as exc:
            desktop_error = str(exc)
        time.sleep(SETTLE_SECONDS)
        desk, raw_desk = box_memory(self.raw.api, container), box_memory(self.raw.api, twin)
        twin_desk = (None, None) if desktop_error else raw_desk
        self.add(
            Row("idle box, its processes' RSS", plain[0], raw_plain[0], "MiB", "<= 10 MiB"),
            Row("idle box, its processes' PSS", plain[1], raw_plain[1], "MiB", "report"),
            Row("idle box with desktop, RSS", desk[0], twin_desk[0], "MiB", "report"),
            Row("idle box with desktop, PSS", desk[1], twin_desk[1], "MiB", "report"),
        )
        self.raw.remove(twin)

    # -- one exec streaming for N minutes -------------------------------------------------
    def long_stream(self) -> None:
        secs = self.scale.stream_minutes * 60
        box = self.boxes[1 % len(self.boxes)]
        sha, nbytes, err = hashlib.sha256(), 0, bytearray()
        gaps: list[float] = []
        error = ""
        with self.meter.measure() as use:
            last = time.perf_counter()
            try:
                stream = self.client.exec_stream(box, ["bash", "-c", PACED.format(secs=secs)])
                for kind, data in stream:
                    now = time.perf_counter()
                    if kind == "stdout":
                        gaps.append(now - last)
                        last = now
                        sha.update(data)
                        nbytes += len(data)
                    else:
                        err += data
                told = err.decode(errors="replace").split()
                if stream.exit_code != 0 or not told or told[0] != sha.hexdigest():
                    error = f"exit {stream.exit_code}, checksum {'ok' if told else 'missing'}"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        self.usage[f"1 exec stream, {self.scale.stream_minutes:g} min"] = use
        if error:
            print(f"  long stream error: {error}", flush=True)
        stalls = sum(g > STALL_SECONDS for g in gaps)
        what = f"1 exec stream for {self.scale.stream_minutes:g} min"
        self.add(
            Row(f"{what}: received", nbytes / 1e6, None, "MB", "sha256 equal"),
            Row(f"{what}: stalls > {STALL_SECONDS:g} s", stalls, None, "n", "0"),
            Row(f"{what}: longest gap", max(gaps, default=0.0), None, "s", "report"),
            Row(f"{what}: errors", int(bool(error)), None, "n", "0"),
        )

    def usage_rows(self) -> None:
        for phase, use in self.usage.items():
            self.add(
                Row(f"paddockd peak RSS, {phase}", use.peak_rss_mib, None, "MiB", "report"),
                Row(f"paddockd CPU, {phase}", use.cpu_pct, None, "% core", "report"),
            )

    def remove_boxes(self) -> None:
        """Ten at a time: the server's own close would delete fifty boxes one by one."""
        names = [b.name for b in self.client.list_boxes() if b.name.startswith(self.prefix)]
        for start in range(0, len(names), 10):
            chunk = names[start : start + 10]

            def rm(i: int, chunk: list[str] = chunk) -> Outcome:
                self.client.delete_box(chunk[i], force=True)
                return Outcome(0)

            parallel(rm, len(chunk))


def interrupt(signum: int, frame: object) -> None:
    # SIGTERM as Ctrl-C: the cleanup in `finally` runs either way.
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--only", default="", help="these phases alone, comma-separated (e.g. density)"
    )
    for name, value in vars(FULL).items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            type=type(value),
            help=f"default {value} ({flag} in --quick: {getattr(QUICK, name)})",
        )
    args = parser.parse_args()
    base = QUICK if args.quick else FULL
    scale = Scale(
        **{k: v if (v := getattr(args, k)) is not None else d for k, d in vars(base).items()}
    )
    signal.signal(signal.SIGTERM, interrupt)
    api = docker.APIClient(
        base_url=f"unix://{ENGINE_SOCKET}", version="auto", timeout=600, max_pool_size=128
    )
    wait_for_engine(api)
    prefix = f"ld-{uuid.uuid4().hex[:4]}x"
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-load-"))
    # The reconcile and reap intervals and capacity model of an installed server (the
    # tests' servers pass every 2 s, reap every 0.5 s and cap CPUs), a subnet with room
    # for --density boxes, and a small type for density.
    srv = Server(
        work / "server",
        reconcile_interval=30.0,
        reap_interval=5.0,
        capacity_cpus=0,
        capacity_memory_mb=0,
        network_bridge_cidr=wide_subnet(),
        # A warm pool of a type of its own ("pooled", the dense type's twin): the dense
        # creates stay cold, and a pooled one is what `new` is on a default install.
        types={"dense": DENSITY_TYPE, "pooled": DENSITY_TYPE},
        pool_types={"pooled": 2},
    )
    assert srv.proc is not None
    client = srv.client()
    started = time.monotonic()
    bench: Bench | None = None
    raw: Raw | None = None
    aborted = ""
    try:
        # The raw side copies its host config from a real box: same limits, same
        # runtime, same seccomp profile.
        probe = client.create_box(f"{prefix}-probe", ttl=600)
        made = api.inspect_container(f"paddock-{probe.id}")
        client.delete_box(probe.id, force=True)
        raw = Raw(api, f"pdload-{prefix}", made)
        bench = Bench(srv, client, raw, Meter(srv.proc.pid), scale, prefix)
        phases: list[tuple[str, Callable[[], None]]] = [
            ("parallel creates", bench.creates),
            ("parallel exec streams", bench.streams),
            ("sequential execs", bench.sequential),
            ("parallel pushes", lambda: bench.pushes(work) if bench else None),
            ("density", bench.density),
            ("long exec stream", bench.long_stream),
        ]
        only = [w for w in args.only.split(",") if w]
        for name, phase in phases:
            if only and not any(w in name for w in only):
                continue
            print(f"[{time.monotonic() - started:6.0f} s] {name}", flush=True)
            try:
                phase()
            except Exception as exc:
                # The figures so far still get printed; the phases after this one need
                # its boxes, so the run ends here.
                aborted = f"; ended in {name}: {type(exc).__name__}: {exc}"
                break
        bench.usage_rows()
    finally:
        print(f"[{time.monotonic() - started:6.0f} s] cleaning up", flush=True)
        cleanup(api, srv, bench, raw)
        client.close()
        shutil.rmtree(work, ignore_errors=True)
    wall = (time.monotonic() - started) / 60
    title = (
        f"Paddock under load vs raw engine (docker-py), same run; {os.cpu_count()} CPUs, "
        f"{wall:.1f} min{', --quick' if args.quick else ''}{aborted}"
    )
    print_table(title, bench.rows)


def cleanup(api: docker.APIClient, srv: Server, bench: Bench | None, raw: Raw | None) -> None:
    """Each step on its own: one failing (the engine restarting) must not leave the
    rest, least of all the paddockd this run started, behind."""
    with contextlib.suppress(Exception):
        wait_for_engine(api, minutes=5)
    steps: list[Callable[[], None]] = []
    if bench is not None:
        steps.append(bench.remove_boxes)
    if raw is not None:
        steps.append(raw.cleanup)
    steps.append(srv.close)
    for step in steps:
        try:
            step()
        except Exception as exc:
            print(f"  cleanup: {step.__name__} failed: {exc}", flush=True)
    if srv.proc is not None and srv.proc.poll() is None:
        srv.proc.terminate()
        srv.proc.wait(timeout=20)


if __name__ == "__main__":
    main()
