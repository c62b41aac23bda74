"""The Docker driver: docker-py calls, each on a worker thread, errors translated once."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import logging
import os
import re
import socket
import tarfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import anyio
import anyio.to_thread
import docker
import docker.errors
import docker.types
import requests.exceptions

from ..domain.errors import (
    Conflict,
    EngineUnavailable,
    InvalidRequest,
    InvalidState,
    NotFound,
    PaddockError,
)
from . import attach, cgroups, cpuset, drivefs, inbox, runfs, seccomp, upload
from .agent import Agents, StartsAgent, Target, boot
from .base import (
    LABEL_BOX,
    LABEL_DISK,
    LABEL_VIEWS,
    STDOUT,
    BoxNetwork,
    ContainerInfo,
    ContainerSpec,
    DiskSink,
    DiskSource,
    DiskUsage,
    EngineInfo,
    ExecProcess,
    ExecSpec,
    FileInfo,
    FileKind,
    ImageInfo,
    Mount,
    Placement,
    Profile,
    Usage,
    VolumeInfo,
)
from .drivefs import DriveFs
from .exec_start import DIAGNOSE, StartChecked, diagnosis
from .feed import Feed
from .hostname import rename
from .idmap import IdMap, box_owned, first_member
from .lxcfs import Lxcfs
from .netns import NetNamespace
from .oci import IO_RATE
from .proctree import end_tree
from .rootmap import etc_copy
from .running import RunningContainers
from .storage import BoxStorage

T = TypeVar("T")
# CPU % is CPU time over wall time between two readings this far apart, taken for all the
# boxes asked about at once (`docker stats` waits 1 s per box).
CPU_WINDOW = 0.25
log = logging.getLogger("paddockd.runtime")
# An exec's create and start longer than this is logged (seconds).
SLOW_EXEC_START = 5.0
USERNS_RUNTIME = "paddock-runc"  # the name engine.py registers the OCI wrapper under


def translate(exc: Exception) -> PaddockError:
    """The one place where docker-py's errors become Paddock's."""
    if isinstance(exc, PaddockError):
        return exc
    if isinstance(exc, docker.errors.NotFound):
        return NotFound(str(exc.explanation or exc))
    if isinstance(exc, docker.errors.APIError):
        return engine_error(exc.status_code or 500, str(exc.explanation or exc))
    if isinstance(
        exc, (requests.exceptions.ConnectionError, docker.errors.DockerException, OSError)
    ):
        return EngineUnavailable(
            "the box engine is not answering; check `paddock status` and the engine log "
            f"({exc.__class__.__name__}: {exc})"
        )
    return PaddockError(f"unexpected engine error: {exc}")


def engine_error(status: int, text: str) -> PaddockError:
    """The engine's error answer (its status and message) as Paddock's."""
    if status == 404:
        return NotFound(text)
    if status < 500:
        return InvalidRequest(text)
    if bad_archive := _bad_archive(text):
        return bad_archive
    if full := _full_disk(text):
        return full
    return PaddockError(f"the box engine failed: {text}")


# The engine's "no space left on device" names the host path it failed at: inside a
# container's layer folder, the box's own disk is full (runtime/boxdisk.py); so is it when
# unpacking a push, whose paths are the box's.
_LAYER_PATH = re.compile(r"/overlay2/[0-9a-f]{64}(-init)?/(merged|diff|work)(/\S*)?")


def _full_disk(text: str) -> InvalidState | None:
    if "no space left on device" not in text:
        return None
    if _LAYER_PATH.search(text) or _UNPACK in text:
        return InvalidState(
            "the box's disk is full: free space in it (`paddock exec BOX -- rm ...`) or "
            "snapshot it, and try again"
        )
    return InvalidState(
        "the box engine's disk is full: free space on the server (`paddock status`, "
        "`paddock snapshots`), and try again"
    )


# The engine answers 500 for an archive it cannot unpack (moby's chrootarchive: "Error
# processing tar file(exit status 1): <why>"); when the why is the archive itself, or a
# member that would replace a folder with a file (noOverwriteDirNonDir), the caller sent it.
_UNPACK = "Error processing tar file"
_NOT_A_TAR = ("archive/tar:", "unexpected EOF")
_DIR_NON_DIR = re.compile(r'cannot overwrite (non-)?directory "([^"]*)"')


def _bad_archive(text: str) -> InvalidRequest | None:
    if _UNPACK not in text:
        return None
    why = text.partition("):")[2].strip() or text
    if any(sign in why for sign in _NOT_A_TAR):
        return InvalidRequest(f"the request body is not a valid tar archive ({why})")
    if found := _DIR_NON_DIR.search(why):
        is_file, path = found.groups()
        there, other = ("a file", "a folder") if is_file else ("a folder", "a file")
        return InvalidRequest(
            f"{path} in the box is {there}: {other} cannot replace it (remove it first)"
        )
    return None


def _run_bind(data: dict[str, Any]) -> Path | None:
    """The host folder a container has as its /run/paddock, from its inspect data."""
    for bind in (data.get("HostConfig") or {}).get("Binds") or ():
        source, _, rest = str(bind).partition(":")
        if rest.split(":")[0] == "/run/paddock":
            return Path(source)
    return None


# Go's os.FileMode bits, which the engine's stat of a path gives.
_GO_DIR, _GO_SYMLINK = 1 << 31, 1 << 27
_GO_SPECIAL = ((1 << 23, 0o4000), (1 << 22, 0o2000), (1 << 20, 0o1000))


def engine_stat(path: str, st: dict[str, Any], uid: int, gid: int, link: str) -> FileInfo:
    """The engine's stat of a path in a stopped box, as the runtime port says it."""
    go = int(st.get("mode", 0))
    kind: FileKind = "dir" if go & _GO_DIR else "symlink" if go & _GO_SYMLINK else "file"
    mode = (go & 0o777) | sum(bits for flag, bits in _GO_SPECIAL if go & flag)
    try:
        mtime = datetime.fromisoformat(str(st.get("mtime", "")).replace("Z", "+00:00"))
        when = mtime.timestamp()
    except ValueError:
        when = 0.0
    target = str(st.get("linkTarget") or "")
    return FileInfo(
        path=path,
        kind=kind,
        size=int(st.get("size") or 0),
        mode=mode,
        mtime=when,
        uid=uid,
        gid=gid,
        link=link if kind == "symlink" else "",
        leads_to=None,
        resolved=target if kind == "symlink" else "",
    )


def _storage_opt(data: dict[str, Any]) -> int | None:
    """The size the engine itself enforces on a container's layer, if any."""
    size = ((data.get("HostConfig") or {}).get("StorageOpt") or {}).get("size")
    return parse_size(str(size)) if size else None


def parse_size(text: str) -> int:
    """Docker's size strings as the engine keeps them ("10240M", "10G", "1073741824")."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


# The kernel's OOM killer picks a box's process before any of the host's (-1000..1000).
BOX_OOM_SCORE_ADJ = 500
FRESH_VIEWS_KEPT = 4096  # containers remembered as having fresh /proc views
RUNNING_LISTING_SECONDS = 10.0  # how often `running` lists the engine's (see running.py)


class DockerRuntime:
    def __init__(
        self,
        socket_path: str,
        userns_base: int | None = None,
        dns: tuple[str, ...] = (),
        network: BoxNetwork | None = None,
        build_network: BoxNetwork | None = None,
        lxcfs: Lxcfs | None = None,
        drives: DriveFs | None = None,
        disks: Path | None = None,
        instance: str = "default",
    ) -> None:
        self._api = (
            docker.APIClient(
                base_url=f"unix://{socket_path}", version="auto", timeout=120, max_pool_size=64
            )
            if Path(socket_path).exists()
            else None
        )
        self._socket_path = socket_path
        self._userns_base = userns_base
        self._ids = IdMap(userns_base) if userns_base is not None else None
        self._dns = list(dns)
        self._network = network
        self._build_network = build_network
        self._profile: Profile | None = None
        self._seccomp = seccomp.load()
        # Stream readers block a thread for as long as a command runs; they must not starve
        # the default pool that every other call uses.
        self._streams = anyio.CapacityLimiter(1024)
        self._pids: dict[str, int] = {}  # container -> its init's pid (samples())
        self._lxcfs = lxcfs
        self._fresh_views: dict[str, int] = {}  # container -> LXCFS device it was fresh under
        self._drives = drives
        self._storage = BoxStorage(lambda: self.api, drives, disks, userns_base, instance)
        self._placements = cpuset.Placements(self._cpuset_of)
        self._sizes = True  # until the engine says its filesystem cannot enforce them
        self._seen = RunningContainers(RUNNING_LISTING_SECONDS)
        self._listing: asyncio.Task[None] | None = None  # a listing taken behind a sync
        self._first_listing = asyncio.Lock()
        self._agents = Agents(self._launch)
        self._targets: dict[str, Target | None] = {}  # container -> where its agent listens

    @property
    def api(self) -> Any:
        # docker-py is only partly typed, and we need a few of its private helpers
        # (archive upload with copyUIDGID); typing it as Any keeps that honest in one spot.
        if self._api is None:
            if not Path(self._socket_path).exists():
                raise EngineUnavailable(f"the box engine socket {self._socket_path} does not exist")
            self._api = docker.APIClient(
                base_url=f"unix://{self._socket_path}",
                version="auto",
                timeout=120,
                max_pool_size=64,
            )
        return self._api

    async def _run(self, fn: Callable[[], T], *, stream: bool = False) -> T:
        def guarded() -> T:
            try:
                return fn()
            except Exception as exc:
                raise translate(exc) from exc

        # A stream read may wait as long as a command is silent: whoever is waiting on it
        # can be cancelled at once (the client left); the thread ends when the read does.
        return await anyio.to_thread.run_sync(
            guarded, limiter=self._streams if stream else None, abandon_on_cancel=stream
        )

    async def _aiter(self, it: Iterator[T]) -> AsyncIterator[T]:
        sentinel = object()
        while True:
            item = await self._run(lambda: next(it, sentinel), stream=True)
            if item is sentinel:
                return
            yield item  # type: ignore[misc]

    # -- engine -----------------------------------------------------------------------
    async def info(self) -> EngineInfo:
        data = await self._run(lambda: self.api.info())
        runtimes = data.get("Runtimes") or {}
        security = " ".join(data.get("SecurityOptions") or [])
        profile: Profile = "plain"
        if "sysbox-runc" in runtimes:
            profile = "sysbox"
        elif "name=userns" in security and USERNS_RUNTIME in runtimes and self._seccomp:
            profile = "userns"
        self._profile = profile
        return EngineInfo(str(data.get("ServerVersion", "?")), profile, self._userns_base)

    async def ensure_network(self) -> None:
        """Create this instance's own bridge network unless it exists (nothing to do on
        the engine's default bridge). Docker makes the Linux bridge; Paddock's rules
        (the engine runs with --iptables=false) do the rest."""
        if self._network is not None:
            await self._ensure(self._network)

    async def _ensure(self, net: BoxNetwork) -> None:
        def work() -> None:
            if self.api.networks(names=[net.name]):
                return
            gateway = net.cidr.split("/")[0]
            subnet = str(ipaddress.ip_interface(net.cidr).network)
            pool = docker.types.IPAMPool(subnet=subnet, gateway=gateway)
            self.api.create_network(
                net.name,
                driver="bridge",
                options={
                    "com.docker.network.bridge.name": net.bridge,
                    "com.docker.network.bridge.enable_ip_masquerade": "false",
                },
                ipam=docker.types.IPAMConfig(pool_configs=[pool]),
                labels={LABEL_BOX + ".network": net.bridge},
            )

        await self._run(work)

    def container_pid(self, cid: str) -> int:
        """The host pid of the container's init, 0 when it has none (blocking: for worker
        threads)."""
        try:
            return int(self.api.inspect_container(cid)["State"]["Pid"] or 0)
        except docker.errors.NotFound:
            return 0  # removed behind paddockd's back: one box unbound, not a failed sync

    def _isolation(self, profile: Profile) -> dict[str, Any]:
        """What a box gets per profile. Never --privileged, never seccomp/systempaths
        unconfined, and SYS_ADMIN only inside the box's user namespace (`userns`)."""
        if profile == "sysbox":
            return {"runtime": "sysbox-runc"}
        if profile == "userns":
            return {
                "runtime": USERNS_RUNTIME,
                "cap_add": ["SYS_ADMIN", "NET_ADMIN"],
                "security_opt": [f"seccomp={self._seccomp}"],
            }
        return {}

    async def image_labels(self, ref: str) -> dict[str, str] | None:
        """The image's labels; None when there is no such image."""
        try:
            data = await self._run(lambda: self.api.inspect_image(ref))
        except NotFound:
            return None
        return dict((data.get("Config") or {}).get("Labels") or {})

    async def image_id(self, ref: str) -> str | None:
        try:
            data = await self._run(lambda: self.api.inspect_image(ref))
        except NotFound:
            return None
        return str(data["Id"])

    async def image_exists(self, ref: str) -> bool:
        try:
            await self._run(lambda: self.api.inspect_image(ref))
            return True
        except NotFound:
            return False

    async def remove_image(self, ref: str) -> None:
        with contextlib.suppress(NotFound):
            await self._run(lambda: self.api.remove_image(ref, noprune=False))

    async def list_images(self, labels: dict[str, str]) -> list[ImageInfo]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        rows = await self._run(lambda: self.api.images(filters=filters))
        return [
            ImageInfo(
                str(row["Id"]),
                tuple(t for t in row.get("RepoTags") or () if t != "<none>:<none>"),
                float(row.get("Created") or 0),
                dict(row.get("Labels") or {}),
            )
            for row in rows
        ]

    # -- containers -------------------------------------------------------------------
    async def create(self, spec: ContainerSpec) -> str:
        profile = self._profile or (await self.info()).profile

        made: list[str] = []  # sized volumes made for it (a failure drops them again)

        def work() -> str:
            # The box's socket folder belongs to the box's root, which is an unprivileged
            # host uid under the user-namespace remap; every user of the box reaches it
            # (the desktop's VNC server runs as abc).
            self._storage.run_folder(spec.run_dir)
            binds = {str(spec.run_dir): {"bind": "/run/paddock", "mode": "rw"}}
            if self._network is not None:
                # On a network of its own Docker would point the box at its embedded
                # resolver (127.0.0.11, inside dockerd); the box asks Paddock's filter on
                # the gateway directly, as on the engine's default bridge.
                resolv = spec.run_dir.parent / "resolv.conf"
                resolv.write_text("".join(f"nameserver {ip}\n" for ip in self._dns))
                resolv.chmod(0o644)
                binds[str(resolv)] = {"bind": "/etc/resolv.conf", "mode": "ro"}
            views = self._views(profile)
            if self._lxcfs is not None and profile != "sysbox" and not views:
                log.warning("LXCFS is not answering: box %s sees the host's CPUs", spec.box_id)
            binds.update({host: {"bind": box, "mode": "ro"} for host, box in views.items()})
            # Chosen now as well as at every start: a new box's start need not ask the
            # engine for an update of its config (20 ms) when nothing moved since.
            chosen = self._placements.place("", int(spec.cpus * 1e9), lambda _: None)
            host_config = self.api.create_host_config(
                nano_cpus=int(spec.cpus * 1e9),
                cpuset_cpus=cpuset.render(chosen),
                # CPU is shared, not reserved (services/capacity.py): under contention each
                # box gets a share weighted by its type's CPUs, up to its own cap above.
                cpu_shares=max(2, int(spec.cpus * 1024)),
                # The host's own (paddockd, the engine, sshd) outlive boxes when memory
                # claims, overcommitted, meet the host's memory.
                oom_score_adj=BOX_OOM_SCORE_ADJ,
                mem_limit=f"{spec.memory_mb}m",
                memswap_limit=f"{spec.memory_mb}m",
                pids_limit=spec.pids,
                binds={
                    **binds,
                    **{
                        m.volume: {"bind": m.target, "mode": "ro" if m.read_only else "rw"}
                        for m in spec.mounts
                    },
                },
                shm_size="256m",
                # /run is per boot on a real computer: pid files and sockets of a stopped
                # box's services must not survive into its next start (or its snapshots).
                tmpfs={"/run": "rw,nosuid,nodev,mode=755"},
                dns=self._dns or None,
                network_mode=self._network.name if self._network else None,
                storage_opt={"size": f"{spec.disk_mb}M"} if spec.disk_mb and self._sizes else None,
                **self._isolation(profile),
            )

            def create(config: dict[str, Any]) -> str:
                try:
                    return made(config)
                except docker.errors.APIError as exc:
                    if exc.status_code == 409:  # the box's name: a container holds it
                        raise Conflict(str(exc.explanation or exc)) from exc
                    raise

            def made(config: dict[str, Any]) -> str:
                created = self.api.create_container(
                    spec.image,
                    name=f"paddock-{spec.box_id}",
                    hostname=spec.hostname,
                    labels={
                        LABEL_BOX: spec.box_id,
                        **spec.labels,
                        **({LABEL_VIEWS: "lxcfs"} if views else {}),
                        # Its layer is to get a filesystem of its own (boxdisk.py).
                        **({LABEL_DISK: "own"} if own_disk(config) else {}),
                    },
                    environment={
                        "PADDOCK_BOX": spec.hostname,
                        "PADDOCK_PROFILE": profile,
                        **({IO_RATE: str(spec.disk_mbps)} if spec.disk_mbps else {}),
                    },
                    host_config=config,
                    detach=True,
                )
                return str(created["Id"])

            def own_disk(config: dict[str, Any]) -> bool:
                sized = bool(spec.disk_mb) and "StorageOpt" not in config
                return sized and self._storage.can_size()

            try:
                return create(host_config)
            except docker.errors.APIError as exc:
                # Sizes need overlay2 on XFS with project quotas; the engine says when its
                # filesystem has none, once, and from then on each box's layer gets a
                # filesystem of its own instead (runtime/boxdisk.py).
                if "StorageOpt" not in host_config or "storage-opt" not in str(exc):
                    raise
                log.warning(
                    "the engine cannot size containers (%s): each box's layer gets a "
                    "filesystem of its own",
                    exc.explanation,
                )
                self._sizes = False
                host_config.pop("StorageOpt")
                return create(host_config)

        def volumes() -> list[Mount]:
            todo = []
            for m in spec.mounts:
                if m.size_mb and self._storage.record_sized_volume(m.volume, m.size_mb):
                    made.append(m.volume)
                    todo.append(m)
            return todo

        def filesystems(todo: list[Mount]) -> None:
            for m in todo:
                self._storage.make_sized_volume(m.volume, m.size_mb or 0)

        async def container() -> str:
            cid = await self._run(work)
            if spec.disk and not (spec.disk_mb and not self._sizes and self._storage.can_size()):
                with anyio.CancelScope(shield=True):
                    await self.remove(cid)
                raise InvalidState("a box made from a saved disk needs a disk of its own here")
            if spec.disk_mb and not self._sizes and self._storage.can_size():
                try:
                    await self._run(
                        lambda: self._storage.give_disk(cid, spec.disk_mb << 20, spec.disk)
                    )
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await self.remove(cid)
                    raise
            return cid

        try:
            todo = await self._run(volumes)
            # The volumes' filesystems and the container with its disk, side by side: each
            # is a loop mount's 10-20 ms; both are there before the start.
            made_fs, made_box = await asyncio.gather(
                self._run(lambda: filesystems(todo)), container(), return_exceptions=True
            )
            if isinstance(made_box, BaseException):
                raise made_box
            if isinstance(made_fs, BaseException):
                with anyio.CancelScope(shield=True):
                    await self.remove(made_box)
                raise made_fs
        except BaseException:
            # Only what this call made: an existing box's volume holds its Docker's data.
            with anyio.CancelScope(shield=True):
                await self._run(lambda: self._storage.drop_volumes(made))
            raise
        return made_box

    def _views(self, profile: Profile) -> dict[str, str]:
        """LXCFS's /proc files for a new box, when LXCFS answers; none under Sysbox,
        whose own filesystem already virtualizes the box's /proc."""
        if self._lxcfs is None or profile == "sysbox":
            return {}
        return self._lxcfs.binds() if self._lxcfs.available() else {}

    async def usage(self, cids: list[str]) -> dict[str, Usage]:
        def work() -> dict[str, Usage]:
            # cid -> (pid, writable layer bytes, its enforced size)
            found: dict[str, tuple[int, int, int | None]] = {}
            for cid in cids:
                with contextlib.suppress(docker.errors.NotFound):
                    # docker-py's inspect_container has no `size`: the one engine call per box.
                    res = self.api._get(
                        self.api._url("/containers/{0}/json", cid), params={"size": 1}
                    )
                    data = self.api._result(res, True)
                    if data["State"].get("Running") and data["State"].get("Pid"):
                        size = (data["HostConfig"].get("StorageOpt") or {}).get("size")
                        found[cid] = (
                            int(data["State"]["Pid"]),
                            int(data.get("SizeRw") or 0),
                            parse_size(size) if size else self._storage.disk_size(cid),
                        )
            before = self._samples(found)
            time.sleep(CPU_WINDOW)
            after = self._samples(found)
            return {
                cid: Usage(
                    cgroups.cpu_percent(before[cid], now),
                    now.memory_bytes,
                    now.memory_limit_bytes,
                    now.pids,
                    now.pids_limit,
                    found[cid][1],
                    found[cid][2],
                )
                for cid, now in after.items()
                if cid in before
            }

        return await self._run(work)

    async def samples(self, cids: list[str]) -> dict[str, cgroups.Sample]:
        def work() -> dict[str, cgroups.Sample]:
            out: dict[str, cgroups.Sample] = {}
            for cid in cids:
                # Its init's pid, kept while it names the container's cgroup: the engine
                # is asked again only after a start (a new init) or a stop.
                for pid in (self._pids.get(cid), None):
                    if pid is None:
                        with contextlib.suppress(docker.errors.NotFound):
                            pid = self.container_pid(cid)
                        if not pid:
                            break
                    try:
                        out[cid] = cgroups.sample(pid, expect=cid)
                        self._pids[cid] = pid
                        break
                    except (OSError, ValueError):
                        self._pids.pop(cid, None)
            self._pids = {cid: self._pids[cid] for cid in cids if cid in self._pids}
            return out

        return await self._run(work)

    @staticmethod
    def _samples(found: dict[str, tuple[int, int, int | None]]) -> dict[str, cgroups.Sample]:
        samples = {}
        for cid, (pid, *_) in found.items():
            with contextlib.suppress(OSError, ValueError):  # it stopped meanwhile
                samples[cid] = cgroups.sample(pid)
        return samples

    async def views_available(self) -> bool:
        profile = self._profile or (await self.info()).profile
        return bool(self._views(profile)) if self._lxcfs else False

    async def stale_views(self, cid: str) -> bool:
        lxcfs = self._lxcfs

        def work() -> bool:
            # Views go stale only when LXCFS's mount is replaced: a container seen fresh
            # under this mount stays fresh, and is not asked of the engine again.
            device = lxcfs.device() if lxcfs is not None else None
            if device is not None and self._fresh_views.get(cid) == device:
                return False
            pid = self.container_pid(cid)
            stale = pid > 0 and Lxcfs.stale(pid)
            if not stale and device is not None:
                if len(self._fresh_views) >= FRESH_VIEWS_KEPT:
                    self._fresh_views.clear()  # removed containers' entries, at last
                self._fresh_views[cid] = device
            return stale

        return await self._run(work)

    def _place(self, cid: str, mine: dict[str, Any]) -> None:
        """Give the box its cpuset (see cpuset.py), again at every start: the CPUs that were
        quiet when it last ran may not be now. `mine`: its host config."""

        def keep(chosen: set[int]) -> None:
            if cpuset.parse(mine.get("CpusetCpus") or "") != chosen:
                self.api.update_container(cid, cpuset_cpus=cpuset.render(chosen))

        self._placements.place(cid, int(mine.get("NanoCpus") or 0), keep)

    def _cpuset_of(self, cid: str) -> set[int] | None:
        try:
            data = self.api.inspect_container(cid)
        except docker.errors.NotFound:
            return None
        if not (data.get("State") or {}).get("Running"):
            return None  # stopped since the listing that named it
        return cpuset.parse(data["HostConfig"].get("CpusetCpus") or "")

    async def start(self, cid: str) -> None:
        def work() -> None:
            data = self.api.inspect_container(cid)
            if self._drives is not None:
                # After a reboot, before the box binds them: its own sized volumes.
                mounts = data.get("Mounts") or ()
                self._drives.mount(str(m.get("Name")) for m in mounts if m.get("Name"))
            self._storage.own_disk(cid, required=LABEL_DISK in (data["Config"].get("Labels") or {}))
            if (run := _run_bind(data)) is not None:
                self._storage.run_folder(run)  # a tmpfs does not outlive a reboot
            self._place(cid, data["HostConfig"])
            self.api.start(cid)
            self._placements.started(cid)
            self._agents.forget(cid)  # its agent went with its last run

        await self._run(work)
        self._seen.started(cid)

    async def stop(self, cid: str, timeout: int) -> None:
        await self._run(lambda: self.api.stop(cid, timeout=timeout))
        self._seen.gone(cid)
        self._placements.unplace(cid)

    async def set_hostname(self, cid: str, hostname: str) -> None:
        def work() -> None:
            data = self.api.inspect_container(cid)
            pid = int(data["State"].get("Pid") or 0)
            if not data["State"].get("Running") or not pid:
                raise PaddockError(f"container {cid[:12]} is not running: cannot rename it")
            files = [str(data["HostnamePath"]), str(data["HostsPath"])]
            upper = ((data.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
            if upper:
                # A box with an identity of its own sees copies on its own disk instead
                # (runtime/rootmap.py); the engine's stay right for the next start's copy.
                layer = Path(str(upper)).parent
                copies = [etc_copy(layer, "hostname"), etc_copy(layer, "hosts")]
                if all(c.is_file() and not c.is_symlink() for c in copies):
                    files = [str(c) for c in copies]
            try:
                rename(pid, str(data["Config"].get("Hostname") or ""), hostname, *files)
            except OSError as exc:
                # Not the engine's trouble (translate would say it is not answering).
                raise PaddockError(f"could not rename the box to {hostname}: {exc}") from exc

        await self._run(work)

    async def retire(self, cid: str) -> None:
        await self._run(lambda: self.api.rename(cid, f"paddock-retired-{cid[:12]}"))

    async def remove(self, cid: str) -> None:
        def work() -> None:
            try:
                data = self.api.inspect_container(cid)
            except docker.errors.NotFound:
                return
            retired = str(data.get("Name") or "").startswith("/paddock-retired-")
            run = None if retired else _run_bind(data)
            with contextlib.suppress(docker.errors.NotFound):
                self.api.remove_container(cid, force=True, v=True)
            self._placements.unplace(cid)
            self._storage.release(cid, run)

        await self._run(work)
        self._seen.gone(cid)
        self._agents.forget(cid)
        self._targets.pop(cid, None)

    async def sweep(self) -> None:
        await self._run(self._storage.sweep)

    @staticmethod
    def _info(data: dict[str, Any]) -> ContainerInfo:
        config = data.get("Config") or {}  # inspect's; a listing has none
        labels = config.get("Labels") or data.get("Labels") or {}
        state = data.get("State")
        pid = 0
        if isinstance(state, dict):
            running, status = bool(state.get("Running")), str(state.get("Status", ""))
            pid = int(state.get("Pid") or 0)
        else:
            running, status = state == "running", str(state or "")
        image = str(config.get("Image") or data.get("Image") or "")
        # Inspect has the id as "Image" (the name is the config's); a listing as "ImageID".
        image_id = str(data.get("ImageID") or (data.get("Image") if config else "") or "")
        networks = (data.get("NetworkSettings") or {}).get("Networks") or {}
        attached: dict[str, Any] = next((n for n in networks.values() if n.get("IPAddress")), {})
        return ContainerInfo(
            str(data["Id"]),
            str(labels.get(LABEL_BOX, "")),
            running,
            status,
            image,
            str(attached.get("IPAddress") or ""),
            str(attached.get("MacAddress") or ""),
            views=bool(labels.get(LABEL_VIEWS)),
            pid=pid,
            hostname=str(config.get("Hostname") or ""),
            image_id=image_id,
            labels=dict(labels),
        )

    async def inspect(self, cid: str) -> ContainerInfo | None:
        try:
            info = self._info(await self._run(lambda: self.api.inspect_container(cid)))
        except NotFound:
            self._seen.gone(cid)
            return None
        if info.box_id:
            self._seen.seen(info)
        return info

    async def containers(self, labels: dict[str, str]) -> list[ContainerInfo]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        rows = await self._run(lambda: self.api.containers(all=True, filters=filters))
        return [self._info(row) for row in rows]

    async def running(self, labels: dict[str, str]) -> list[ContainerInfo]:
        if self._seen.never_listed():
            async with self._first_listing:  # two first syncs: one listing
                if self._seen.never_listed():
                    await self._list_running()
        elif self._seen.listing_due(time.monotonic()) and self._listing is None:
            # Behind the caller (at 500 boxes a listing takes 100-250 ms, and every create
            # and start syncs the network): what paddockd starts, stops and inspects keeps
            # the view current meanwhile (running.py).
            self._listing = asyncio.get_running_loop().create_task(self._list_behind())
        for cid in self._seen.unseen():
            await self.inspect(cid)
        return self._seen.matching(labels)

    async def _list_running(self) -> None:
        began = time.monotonic()
        self._seen.listing()
        filters = {"label": LABEL_BOX, "status": "running"}
        try:
            rows = await self._run(lambda: self.api.containers(filters=filters))
            infos = [self._info(row) for row in rows]
        except BaseException:
            self._seen.listing_failed()
            raise
        self._seen.listed(infos, time.monotonic())
        self._placements.running({i.id for i in infos}, began)

    async def _list_behind(self) -> None:
        try:
            await self._list_running()
        except Exception as exc:  # the next sync that finds it due tries again
            log.warning("listing the running boxes failed: %s", exc)
        finally:
            self._listing = None

    async def commit(self, cid: str, repository: str, tag: str) -> str:
        def work() -> Any:
            self._storage.own_disk(cid)  # a box stopped by a reboot is committed after it
            data = self.api.inspect_container(cid)
            limit = self._storage.disk_size(cid) or _storage_opt(data)
            upper = ((data.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
            if limit and upper:
                self._storage.check_commit(cid, str(upper), limit)
            return self.api.commit(cid, repository=repository, tag=tag, pause=True)

        return str((await self._run(work))["Id"])

    async def layer_size(self, ref: str) -> int:
        """Bytes the image's top layer adds (what a snapshot costs on disk)."""
        history = await self._run(lambda: self.api.history(ref))
        return int(history[0].get("Size", 0)) if history else 0

    # -- saved disks (runtime/boxdisk.py, diskcopy.py) ---------------------------------
    async def copies_disks(self) -> bool:
        return await self._run(self._storage.copies_disks)

    async def save_disk(self, cid: str, key: str) -> bool:
        return await self._run(lambda: self._storage.save_disk(cid, key))

    async def load_disk(self, cid: str, key: str) -> bool:
        return await self._run(lambda: self._storage.load_disk(cid, key))

    async def copy_disk(self, source: str, key: str) -> None:
        await self._run(lambda: self._storage.copy_disk(source, key))

    async def drop_disk(self, key: str) -> None:
        await self._run(lambda: self._storage.drop_disk(key))

    async def saved_disks(self) -> set[str]:
        return await self._run(self._storage.saved_disks)

    async def disk_usage(self, keys: list[str]) -> dict[str, DiskUsage]:
        return await self._run(lambda: self._storage.disk_usage(keys))

    async def open_disk(self, key: str) -> DiskSource:
        return await self._run(lambda: self._storage.open_disk(key))

    async def new_disk(self, key: str, size: int) -> DiskSink:
        return await self._run(lambda: self._storage.new_disk(key, size))

    # -- volumes ----------------------------------------------------------------------
    async def create_volume(
        self, name: str, labels: dict[str, str], size: int | None = None
    ) -> VolumeInfo:
        def work() -> VolumeInfo:
            opts = None
            if size is not None:
                if self._drives is None or (why := drivefs.available()):
                    raise InvalidRequest(
                        "this server cannot give drives a size: "
                        f"{why if self._drives else 'no folder for them is set'}"
                    )
                with contextlib.suppress(docker.errors.NotFound):
                    self.api.inspect_volume(name)
                    raise Conflict(f"the engine already has a volume {name!r}")
                # The engine binds the drive's own filesystem: its size is its limit.
                device = self._drives.create(name, size)
                opts = {"type": "none", "o": "bind", "device": device}
            data = self.api.create_volume(
                name=name, driver="local", labels=labels, driver_opts=opts
            )
            if (data.get("Labels") or {}) != labels:
                # Docker hands back an existing volume of that name as it is.
                raise Conflict(f"the engine already has a volume {name!r} that is not this one")
            mountpoint = str(data["Mountpoint"])
            # A fresh volume belongs to host root; make it the box user's (uid 1000 in the
            # box), or `abc` could not write to its own drive. (A sized drive's root is
            # theirs from the start.)
            if self._userns_base is not None and size is None:
                os.chown(mountpoint, self._userns_base + 1000, self._userns_base + 1000)
                os.chmod(mountpoint, 0o775)
            return VolumeInfo(name, dict(data.get("Labels") or {}), mountpoint)

        return await self._run(work)

    async def release_run_folder(self, folder: Path) -> None:
        await anyio.to_thread.run_sync(runfs.release, folder)

    async def remove_volume(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self._run(lambda: self.api.remove_volume(name))
        drives = self._drives
        if drives is not None and drives.has(name):
            await self._run(lambda: drives.remove(name))

    async def volumes(self, labels: dict[str, str]) -> list[VolumeInfo]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        data = await self._run(lambda: self.api.volumes(filters=filters))
        return [
            VolumeInfo(str(v["Name"]), dict(v.get("Labels") or {}), str(v["Mountpoint"]))
            for v in (data.get("Volumes") or [])
        ]

    async def volume_folder(self, volume: VolumeInfo) -> str:
        drives = self._drives
        if drives is None or not drives.has(volume.name):
            return volume.mountpoint

        def work() -> str:
            drives.mount([volume.name])
            return drives.mountpoint(volume.name)

        return await self._run(work)

    async def volume_usage(self, volume: VolumeInfo) -> int:
        def work() -> int:
            if self._drives is not None and self._drives.has(volume.name):
                return self._drives.usage(volume.name)[0]
            total = 0
            for root, _, files in os.walk(volume.mountpoint):
                for name in files:
                    with contextlib.suppress(OSError):
                        total += os.lstat(os.path.join(root, name)).st_blocks * 512
            return total

        return await self._run(work)

    # -- exec -------------------------------------------------------------------------
    async def exec(self, cid: str, spec: ExecSpec) -> ExecProcess:
        # A box's first command goes to the engine untouched (no look at where an agent
        # would be): most boxes made and asked once never have one.
        if not spec.tty and self._agents.used(cid):
            target = await self.agent_target(cid)
            if target is not None:
                proc = await self._agents.exec(target, spec)
                if proc is not None:
                    return proc
        checked = await self.engine_exec(cid, spec)
        if spec.tty:
            return checked
        return StartsAgent(checked, lambda: self._agents.wanted(cid))

    async def agent_target(self, cid: str) -> Target | None:
        """Where the container's exec agent listens; None where it can have none (no run
        folder, or groups the engine adds to every exec)."""
        if cid in self._targets:
            return self._targets[cid]

        def work() -> Target | None:
            data = self.api.inspect_container(cid)
            folder = _run_bind(data)
            if folder is None or (data.get("HostConfig") or {}).get("GroupAdd"):
                return None
            env = (data.get("Config") or {}).get("Env") or ()
            return Target(folder, any(str(e).startswith("HOME=") for e in env))

        target = await self._run(work)
        self._targets[cid] = target
        return target

    async def warm_exec(self, cid: str) -> None:
        await self._agents.warm(cid)

    async def _launch(self, cid: str, first: float) -> None:
        """Start the container's agent (a detached engine exec), where it can have one."""
        target = await self.agent_target(cid)
        if target is None:
            return
        spec = boot(target, first)

        def work() -> None:
            made = self.api.exec_create(cid, spec.cmd, environment=spec.env, user=spec.user)
            self.api.exec_start(made["Id"], detach=True)

        await self._run(work)

    async def engine_exec(self, cid: str, spec: ExecSpec) -> StartChecked:
        """The engine's own exec, never the box's agent (what the agent must match)."""

        def work(spec: ExecSpec) -> _DockerExec:
            began = time.monotonic()
            created = self.api.exec_create(
                cid,
                spec.cmd,
                stdout=True,
                stderr=True,
                stdin=spec.stdin,
                tty=spec.tty,
                environment=spec.env or None,
                workdir=spec.workdir or None,
                user=spec.user,
            )
            exec_id = created["Id"]
            made = time.monotonic()
            sock = self.api.exec_start(exec_id, tty=spec.tty, socket=True)
            if (done := time.monotonic()) - began > SLOW_EXEC_START:
                # The caller waits on this with nothing to show; the engine's side is the
                # only place to look for why (an operator's first clue).
                log.warning(
                    "the engine took %.1fs to start a command in %s (create %.1fs, start %.1fs)",
                    done - began,
                    cid[:12],
                    made - began,
                    done - made,
                )
            return _DockerExec(self, exec_id, sock, spec.tty)

        async def diagnose() -> tuple[int, str] | None:
            # The engine lost why it could not start the command: the box's own shell
            # says, as root with the exec's environment (the engine's report, rebuilt).
            argv = ["/bin/sh", "-c", DIAGNOSE, "sh", spec.user or "", spec.workdir or ""]
            check = ExecSpec([*argv, spec.cmd[0] if spec.cmd else ""], spec.env, "", "root")
            proc = StartChecked(await self._run(lambda: work(check)))
            out = b""
            try:
                with anyio.move_on_after(10):  # the box's shell may be anything: bounded
                    async for kind, data in proc.output():
                        if kind == STDOUT and len(out) < 4096:
                            out += data
                    return diagnosis(out) if await proc.wait() == 0 else None
                await proc.kill()
                return None
            finally:
                await proc.close()

        return StartChecked(await self._run(lambda: work(spec)), diagnose)

    async def open_network(self, cid: str) -> NetNamespace:
        def pid_of() -> int:
            data = self.api.inspect_container(cid)
            state = data.get("State") or {}
            return int(state.get("Pid") or 0) if state.get("Running") else 0

        before = await self._run(pid_of)
        if not before:
            raise InvalidState("the box is not running")
        ns = await anyio.to_thread.run_sync(NetNamespace.of_pid, before)
        # The pid was read before the namespace was opened: had the box's init died in
        # between and the pid gone to another process, the engine would now say so.
        if await self._run(pid_of) != before:
            ns.close()
            raise InvalidState("the box is not running")
        return ns

    async def logs(self, cid: str, tail: int = 0) -> str:
        """The container's output (the box's init and services), or its last `tail` lines."""
        data = await self._run(
            lambda: self.api.logs(cid, stdout=True, stderr=True, tail=tail or "all")
        )
        return bytes(data).decode(errors="replace")

    # -- files ------------------------------------------------------------------------
    async def _running(self, cid: str) -> bool:
        data = await self._run(lambda: self.api.inspect_container(cid))
        return bool((data.get("State") or {}).get("Running"))

    async def _exec_in(self, cid: str) -> inbox.Exec:
        async def run(spec: ExecSpec) -> ExecProcess:
            return await self.exec(cid, spec)

        return run

    async def _in_running(self, cid: str) -> inbox.Exec:
        if not await self._running(cid):
            raise InvalidState("the box is not running")
        return await self._exec_in(cid)

    # A running box's files are moved by a program inside it (runtime/inbox.py): the
    # engine's archive API writes with its one remap of box ids, which a box with an
    # identity of its own does not use. A stopped box's go through the engine, which
    # mounts its root with the engine's ids for the copy.
    async def put_archive(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        place: Placement | None = None,
    ) -> str:
        data = await self._run(lambda: self.api.inspect_container(cid))
        if (data.get("State") or {}).get("Running"):
            run = _run_bind(data)
            feed = Feed.open(run) if run is not None else None
            if place is not None:
                return await inbox.copy(await self._exec_in(cid), path, owner, place, chunks, feed)
            await inbox.put(await self._exec_in(cid), path, owner, chunks, feed)
            return path
        if place is not None:
            raise InvalidState("the box is not running")
        # Stopped since the caller looked: the engine's copy, into a folder that exists.
        # copyUIDGID: without it the engine chowns every file to the box's root, and the
        # box user could not edit what it was given. noOverwriteDirNonDir, as `docker cp`
        # sets it: a file never silently replaces a whole folder (nor a folder a file).
        target = f"/v{self.api._version}/containers/{quote(cid, safe='')}/archive?" + urlencode(
            {"path": path, "copyUIDGID": "1", "noOverwriteDirNonDir": "1"}
        )
        await self._run(lambda: self._storage.own_disk(cid))
        try:
            status, text = await upload.put(self._socket_path, target, "application/x-tar", chunks)
        except OSError as exc:
            raise translate(exc) from exc
        if status >= 400:
            raise engine_error(status, upload.message(text))
        return path

    async def write_file(
        self, cid: str, path: str, owner: tuple[int, int], chunks: AsyncIterator[bytes]
    ) -> FileInfo:
        return await inbox.write(await self._exec_in(cid), path, owner, chunks)

    async def list_files(
        self, cid: str, path: str, depth: int, limit: int, user: str = "root"
    ) -> list[FileInfo]:
        return await inbox.listing(await self._in_running(cid), path, depth, limit, user)

    async def make_dirs(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int] | None,
        user: str = "root",
        new: bool = False,
    ) -> None:
        ids = [str(i) for i in owner] if owner else ["", ""]
        flag = "1" if new else "0"
        await inbox.run(await self._in_running(cid), "mkdirs", path, *ids, flag, user=user)

    async def move_file(self, cid: str, src: str, dest: str, user: str = "root") -> None:
        await inbox.run(await self._in_running(cid), "move", src, dest, user=user)

    async def remove_file(self, cid: str, path: str, user: str = "root") -> None:
        await inbox.run(await self._in_running(cid), "remove", path, user=user)

    async def signal(self, cid: str, name: str, sig: str) -> None:
        await inbox.signal(await self._in_running(cid), name, sig)

    async def trust(self, cid: str, name: str, pem: bytes) -> None:
        await inbox.trust(await self._in_running(cid), name, pem)

    def _archive(self, cid: str, path: str) -> tuple[Any, tarfile.TarFile, tarfile.TarInfo]:
        """Start the engine's archive of `path`: the response, the tar read from it and its
        top entry, read already (its owner is the stat's). Blocking: call in a thread."""
        self._storage.own_disk(cid)  # a stopped box's, after a reboot
        # Uncompressed: the engine would gzip for requests' default Accept-Encoding, only
        # for this side to gunzip it again (both on the same machine's CPU).
        res = self.api._get(
            self.api._url("/containers/{0}/archive", cid),
            params={"path": path},
            headers={"Accept-Encoding": "identity"},
            stream=True,
        )
        try:
            self.api._raise_for_status(res)
            res.raw.decode_content = True  # should the engine compress all the same
            # Closed with the answer it reads (the caller's job).
            tar = tarfile.open(  # noqa: SIM115
                fileobj=res.raw, mode="r|", encoding="utf-8", errors="surrogateescape"
            )
            return res, tar, first_member(tar)
        except BaseException:
            res.close()
            raise

    def _stat(self, path: str, res: Any, top: tarfile.TarInfo) -> FileInfo:
        """The engine's stat (Go's os.FileMode bits) and the archive's top entry (the
        owner, as host ids) as the box sees them."""
        header = res.headers.get("X-Docker-Container-Path-Stat", "")
        st = dict(json.loads(base64.b64decode(header))) if header else {}
        ids = self._ids
        return engine_stat(
            path,
            st,
            ids.to_box(top.uid) if ids else top.uid,
            ids.to_box(top.gid) if ids else top.gid,
            top.linkname,
        )

    async def get_archive(self, cid: str, path: str) -> tuple[AsyncIterator[bytes], FileInfo]:
        if await self._running(cid):
            return await inbox.get(await self._exec_in(cid), path)
        res, tar, top = await self._run(lambda: self._archive(cid, path))

        def chunks() -> Iterator[bytes]:
            with contextlib.closing(res):
                yield from box_owned(tar, top, self._ids)

        return self._aiter(chunks()), self._stat(path, res, top)

    async def stat_file(self, cid: str, path: str, user: str = "root") -> FileInfo | None:
        if await self._running(cid):
            return await inbox.stat(await self._exec_in(cid), path, user)

        def work() -> FileInfo | None:
            # The engine's stat has no owner; the archive's top entry does. Only its first
            # block is read: the engine stops writing the rest when the answer is closed.
            try:
                res, _, top = self._archive(cid, path)
            except docker.errors.APIError as exc:
                # The engine answers 404 for a missing path and 500 for one that runs
                # through a file (ENOTDIR); for a stat both mean "nothing there". Not when
                # it could not look at all (a full disk).
                if exc.status_code in (404, 500) and not _full_disk(str(exc.explanation)):
                    return None
                raise
            with contextlib.closing(res):
                return self._stat(path, res, top)

        return await self._run(work)

    # -- images -----------------------------------------------------------------------
    async def import_tarball(self, path: Path, ref: str) -> None:
        repo, _, tag = ref.rpartition(":")
        await self._run(
            lambda: self.api.import_image_from_file(str(path), repository=repo, tag=tag)
        )

    async def build(
        self,
        context: Path,
        dockerfile: str,
        tag: str,
        buildargs: dict[str, str],
        nocache: bool,
        labels: dict[str, str] | None = None,
    ) -> AsyncIterator[str]:
        if self._build_network is not None:
            await self._ensure(self._build_network)
        network_mode = self._build_network.name if self._build_network else None
        events = await self._run(
            lambda: self.api.build(
                path=str(context),
                network_mode=network_mode,
                dockerfile=dockerfile,
                tag=tag,
                buildargs=buildargs,
                nocache=nocache,
                labels=labels,
                rm=True,
                forcerm=True,
                decode=True,
            )
        )
        async for event in self._aiter(iter(events)):
            if "error" in event:
                raise PaddockError(f"image build failed: {event['error'].strip()}")
            if text := event.get("stream") or event.get("status"):
                yield str(text)


class _DockerExec:
    def __init__(self, runtime: DockerRuntime, exec_id: str, sock: Any, tty: bool) -> None:
        self._rt = runtime
        self._id = exec_id
        self._sock = sock
        self._raw: socket.socket = getattr(sock, "_sock", sock)
        self._tty = tty
        self._code: int | None = None

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        async for kind, data in attach.output(self._raw, self._tty):
            yield kind, data

    async def never_started(self) -> bool:
        data = await self._rt._run(lambda: self._rt.api.exec_inspect(self._id))
        return not data.get("Pid")

    async def wait(self) -> int:
        def work() -> int:
            # The stream can end a moment before the engine records the exit code.
            for _ in range(200):
                data = self._rt.api.exec_inspect(self._id)
                if not data.get("Running") and data.get("ExitCode") is not None:
                    return int(data["ExitCode"])
                time.sleep(0.01)
            return -1

        # Asked twice for a silent command (the start check, then its caller): once is enough.
        if self._code is not None:
            return self._code
        code = await self._rt._run(work)
        if code != -1:  # not yet recorded: a later call asks again
            self._code = code
        return code

    async def write(self, data: bytes) -> None:
        self._raw.setblocking(False)
        try:
            await attach.send_all(self._raw, data)
        except OSError as exc:
            raise translate(exc) from exc

    async def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_WR)

    async def resize(self, cols: int, rows: int) -> None:
        await self._rt._run(lambda: self._rt.api.exec_resize(self._id, height=rows, width=cols))

    async def kill(self) -> None:
        def work() -> None:
            data = self._rt.api.exec_inspect(self._id)
            if data.get("Running") and data.get("Pid"):
                end_tree(int(data["Pid"]))

        with contextlib.suppress(PaddockError, OSError):
            await self._rt._run(work)

    async def close(self) -> None:
        try:
            self._sock.close()
            self._raw.close()
        except OSError:
            pass
