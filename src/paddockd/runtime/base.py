"""What the services need from a container engine, and nothing more."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from . import diskcopy
from .cgroups import Sample

DiskUsage = diskcopy.Usage

Profile = Literal["sysbox", "userns", "plain"]

STDOUT = 1
STDERR = 2

LABEL_BOX = "paddock.box"
LABEL_INSTANCE = "paddock.instance"
LABEL_NAME = "paddock.name"
LABEL_DRIVE = "paddock.drive"
# On a member's drive: their user id. A drive without it is the owner's.
LABEL_OWNER = "paddock.owner"
# On boxes created with LXCFS's /proc views bound in.
LABEL_VIEWS = "paddock.views"
# On containers whose writable layer is on a filesystem of its own (runtime/boxdisk.py).
LABEL_DISK = "paddock.disk"
# On a box's volume made with a size of its own (its Docker data): that size, in MiB.
LABEL_SIZE = "paddock.size_mb"
# On containers made for the warm pool: the box type, and what else a claim must match
# (services/pool.py). They stay on a claimed box's container (labels are fixed), so only
# a container no box row names is the pool's; a box's own containers carry LABEL_POOL
# blank (a claimed box's snapshots would pass it on otherwise).
LABEL_POOL = "paddock.pool"
LABEL_POOL_KEY = "paddock.pool.key"


@dataclass(frozen=True)
class EngineInfo:
    version: str
    profile: Profile
    userns_base: int | None = None


@dataclass(frozen=True)
class Mount:
    volume: str
    target: str
    read_only: bool = False
    size_mb: int = 0  # a new volume's size (an existing one is used as it is); 0: none


@dataclass(frozen=True)
class VolumeInfo:
    name: str
    labels: dict[str, str]
    mountpoint: str


@dataclass(frozen=True)
class BoxNetwork:
    """A bridge network of an instance's own, made in the engine on first use."""

    name: str
    bridge: str
    cidr: str  # gateway address / prefix, e.g. 10.214.7.1/24


@dataclass(frozen=True)
class ContainerSpec:
    box_id: str
    hostname: str
    image: str
    cpus: float
    memory_mb: int
    pids: int
    run_dir: Path
    labels: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    disk_mb: int = 0  # the root filesystem's size, where the engine enforces sizes
    disk_mbps: int = 0  # its disks' read and write rate cap (runtime/oci.py); 0: none
    disk: str | None = None  # a saved disk its own disk starts as a copy of (see save_disk)


@dataclass(frozen=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]  # empty when untagged (its tag moved to a newer image)
    created: float  # Unix time
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    box_id: str
    running: bool
    status: str
    image: str = ""
    ip: str = ""
    mac: str = ""
    views: bool = False  # LXCFS's /proc files are bound in (see runtime/lxcfs.py)
    pid: int = 0  # the host pid of its init while it runs (from inspect; 0 in listings)
    hostname: str = ""  # what it was created with (from inspect; "" in listings)
    image_id: str = ""  # the image it runs, by id (a tag can move to a newer image)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """What a running container uses now."""

    cpu_percent: float  # 100 = one whole CPU
    memory_bytes: int
    memory_limit_bytes: int | None
    pids: int
    pids_limit: int | None
    layer_bytes: int  # its writable layer
    layer_limit_bytes: int | None = None  # its size, where the engine enforces one


FileKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class FileInfo:
    """A path in a box, as the box sees it (its own owner ids and names)."""

    path: str
    kind: FileKind
    size: int
    mode: int  # permission bits (and setuid, setgid, sticky)
    mtime: float  # Unix time
    uid: int
    gid: int
    owner: str = ""  # names from the box's own passwd and group files
    group: str = ""
    link: str = ""  # a link's target, as written
    # What a link leads to in the box ("missing": nothing), and its full path there.
    leads_to: FileKind | Literal["missing"] | None = None
    resolved: str = ""

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1] or "/"


@dataclass(frozen=True)
class Placement:
    """Where a push lands, decided in the box by docker cp's rules (the caller did not look
    first): `kind` "file" or "dir" for one SRC sent whole, its tar's top entry `name`;
    "into" for several SRCs or one's contents, whose tar goes into DEST as a folder."""

    kind: Literal["file", "dir", "into"]
    name: str = ""


@dataclass(frozen=True)
class ExecSpec:
    cmd: list[str]
    env: dict[str, str]
    workdir: str
    user: str
    tty: bool = False
    stdin: bool = False


class BoxNetworkHandle(Protocol):
    """A running box's own network, held open: sockets made in it reach the box's own
    loopback, never the host's (previews use it)."""

    @property
    def closed(self) -> bool: ...

    def spare(self) -> socket.socket | None:
        """A socket made ahead in the box's network, if one is ready (not blocking)."""
        ...

    def socket(self) -> socket.socket:
        """A TCP socket in the box's network (blocking: call in a thread)."""
        ...

    def close(self) -> None: ...


class ExecProcess(Protocol):
    """A command running in a box."""

    def output(self) -> AsyncIterator[tuple[int, bytes]]: ...

    async def wait(self) -> int: ...

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def resize(self, cols: int, rows: int) -> None: ...

    async def kill(self) -> None:
        """End the command and everything it started, if it still runs (TERM, then KILL)."""
        ...

    async def close(self) -> None: ...


class ExecWrapper:
    """An `ExecProcess` that passes every call to the one it wraps; subclasses change what
    they must."""

    def __init__(self, proc: ExecProcess) -> None:
        self._proc = proc

    def output(self) -> AsyncIterator[tuple[int, bytes]]:
        return self._proc.output()

    async def wait(self) -> int:
        return await self._proc.wait()

    async def write(self, data: bytes) -> None:
        await self._proc.write(data)

    async def close_stdin(self) -> None:
        await self._proc.close_stdin()

    async def resize(self, cols: int, rows: int) -> None:
        await self._proc.resize(cols, rows)

    async def kill(self) -> None:
        await self._proc.kill()

    async def close(self) -> None:
        await self._proc.close()


class DiskSource(Protocol):
    """A saved disk's bytes, for an export; blocking (a worker thread's)."""

    size: int

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of its data, in order; holes are left out."""
        ...

    def close(self) -> None: ...


class DiskSink(Protocol):
    """A saved disk being written, for an import; blocking (a worker thread's). It has
    its name, and is a disk others may copy, only once committed."""

    def write(self, offset: int, data: bytes) -> None: ...

    def commit(self) -> None:
        """ValueError if what was written is not a disk this server could have made."""
        ...

    def abort(self) -> None: ...


class Runtime(Protocol):
    async def info(self) -> EngineInfo: ...

    async def ensure_network(self) -> None:
        """Create the instance's own box network if it has one and it is missing."""
        ...

    async def image_exists(self, ref: str) -> bool: ...

    async def image_labels(self, ref: str) -> dict[str, str] | None: ...

    async def image_id(self, ref: str) -> str | None:
        """The id of the image `ref` names now; None when there is no such image."""
        ...

    async def remove_image(self, ref: str) -> None: ...

    async def list_images(self, labels: dict[str, str]) -> list[ImageInfo]:
        """Images carrying all these labels (a commit keeps its container's labels)."""
        ...

    async def create(self, spec: ContainerSpec) -> str:
        """A new container for the box; Conflict where one holds its name already."""
        ...

    async def start(self, cid: str) -> None:
        """Start the container, on the least busy host CPUs its share allows."""
        ...

    async def stop(self, cid: str, timeout: int) -> None: ...

    async def set_hostname(self, cid: str, hostname: str) -> None:
        """Rename the running container from inside: its UTS hostname, /etc/hostname and
        its own entry in /etc/hosts (all three are what it was created with until then)."""
        ...

    async def remove(self, cid: str) -> None: ...

    async def retire(self, cid: str) -> None:
        """Give a container that is to go its box's name back at once (a new container of
        the box may be made beside it); `remove` it after. Its box's run folder is the new
        container's from now on: the removal leaves it be."""
        ...

    async def sweep(self) -> None:
        """Drop what containers removed behind paddockd's back (or mid-crash) left."""
        ...

    async def inspect(self, cid: str) -> ContainerInfo | None: ...

    async def usage(self, cids: list[str]) -> dict[str, Usage]:
        """Figures of each running container (those not running are left out)."""
        ...

    async def samples(self, cids: list[str]) -> dict[str, Sample]:
        """One cheap reading of each running container's CPU time and memory (those not
        running are left out): what a history of its use is made of, every few seconds."""
        ...

    async def views_available(self) -> bool:
        """Whether a box created now gets its own /proc views (LXCFS answers)."""
        ...

    async def stale_views(self, cid: str) -> bool:
        """Whether the running container's /proc views died with an earlier LXCFS."""
        ...

    async def containers(self, labels: dict[str, str]) -> list[ContainerInfo]: ...

    async def running(self, labels: dict[str, str]) -> list[ContainerInfo]:
        """The running ones of `containers(labels)`, with their addresses: those paddockd
        started and inspected since the engine was last listed are in it, others within
        seconds (see runtime/running.py); a container stopped behind paddockd's back may
        stay in it as long."""
        ...

    async def commit(self, cid: str, repository: str, tag: str) -> str: ...

    async def layer_size(self, ref: str) -> int: ...

    # -- saved disks: copies of a box's own disk, at the speed of metadata ----------------
    async def copies_disks(self) -> bool:
        """Whether boxes' disks are copied here (reflinks) rather than committed."""
        ...

    async def save_disk(self, cid: str, key: str) -> bool:
        """Copy the container's own disk (consistent: a running box is frozen for the
        copy's milliseconds) as the saved disk `key` (`FOLDER/NAME`, lowercase letters and
        digits); False if the container has no disk of its own."""
        ...

    async def load_disk(self, cid: str, key: str) -> bool:
        """Replace the container's disk with a copy of the saved disk `key` (a restore
        that keeps the container), from its next start: a running container keeps the
        disk it has until it stops. False if it has no disk of its own (the caller makes
        a new container instead)."""
        ...

    async def copy_disk(self, source: str, key: str) -> None: ...

    async def drop_disk(self, key: str) -> None:
        """Remove a saved disk (`FOLDER/*`: all in the folder); what it alone held is
        freed, what other copies share stays theirs."""
        ...

    async def saved_disks(self) -> set[str]: ...

    async def disk_usage(self, keys: list[str]) -> dict[str, DiskUsage]:
        """Each saved disk's bytes: its own, and those it shares with other copies."""
        ...

    async def open_disk(self, key: str) -> DiskSource:
        """The saved disk `key`'s bytes, readable to the end even if it is removed."""
        ...

    async def new_disk(self, key: str, size: int) -> DiskSink:
        """A saved disk `key` of `size` bytes to write (an import)."""
        ...

    async def create_volume(
        self, name: str, labels: dict[str, str], size: int | None = None
    ) -> VolumeInfo:
        """A volume owned by the box user; with `size` (bytes), one that holds no more."""
        ...

    async def remove_volume(self, name: str) -> None: ...

    async def release_run_folder(self, folder: Path) -> None:
        """Let go of a box's run folder (`ContainerSpec.run_dir`) whatever became of its
        container (one removed by hand leaves it held), so that the folder can go."""
        ...

    async def volumes(self, labels: dict[str, str]) -> list[VolumeInfo]: ...

    async def volume_usage(self, volume: VolumeInfo) -> int: ...

    async def volume_folder(self, volume: VolumeInfo) -> str:
        """The host folder holding the volume's files now (a drive with a size: its own
        filesystem, mounted first). For host root's tools only: backups."""
        ...

    async def exec(self, cid: str, spec: ExecSpec) -> ExecProcess: ...

    async def warm_exec(self, cid: str) -> None:
        """Ready the running container for quick commands from its first one on (a warm
        pool's box, before its claim); nothing where that cannot be done."""
        ...

    async def open_network(self, cid: str) -> BoxNetworkHandle:
        """The running container's network, held open until closed; InvalidState when it
        is not running (a pid reused by another process is never entered)."""
        ...

    async def logs(self, cid: str, tail: int = 0) -> str:
        """The container's output (its init and services); the last `tail` lines, 0: all."""
        ...

    # -- files: what each does inside a box is runtime/inbox.py's; the fake mirrors it,
    # and tests/integration/test_inbox_contract.py runs the same cases on both. `user`
    # is who does it in the box (its permissions apply); errors are NotFound,
    # InvalidRequest (not a folder, a folder, exists, no permission), InvalidState (disk
    # full, box not running).
    async def put_archive(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        place: Placement | None = None,
    ) -> str:
        """Unpack the tar `chunks` into the folder `path` of the running container, by
        `docker cp`'s rules: owners from the archive, and no file replaces a folder nor a
        folder anything else. `path` and the folders on the way are made first, new ones
        `owner`'s. With `place`, `path` is a copy's DEST instead and the tar lands by
        `RULES` (paddock/_placement.py): DEST's folder must exist, and only a DEST made
        for `into` is `owner`'s. Returns the path it landed at (the folder without
        `place`)."""
        ...

    async def write_file(
        self, cid: str, path: str, owner: tuple[int, int], chunks: AsyncIterator[bytes]
    ) -> FileInfo:
        """`chunks`, of any length, as the file `path` in the running container (folders
        on the way made, `owner`'s)."""
        ...

    async def get_archive(self, cid: str, path: str) -> tuple[AsyncIterator[bytes], FileInfo]:
        """A tar of `path` (its base name on top, links as links) and what `path` is.
        Owners are the box's own ids, not the host's. A stopped box's too."""
        ...

    async def stat_file(self, cid: str, path: str, user: str = "root") -> FileInfo | None:
        """What `path` is (a link itself, not what it leads to); None when nothing is
        there (or a part of the path is no folder). A stopped box's too."""
        ...

    async def list_files(
        self, cid: str, path: str, depth: int, limit: int, user: str = "root"
    ) -> list[FileInfo]:
        """What the folder `path` holds, `depth` levels down (1: its entries), at most
        `limit` entries (in the order the box's folder gives them)."""
        ...

    async def make_dirs(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int] | None,
        user: str = "root",
        new: bool = False,
    ) -> None:
        """The folder `path` and those on the way, each new one `owner`'s (None: the
        user's); with `new`, refused (exists) when `path` is there already."""
        ...

    async def move_file(self, cid: str, src: str, dest: str, user: str = "root") -> None:
        """Rename `src` to `dest` (folders on the way to `dest` made); `dest` is replaced
        as rename(2) replaces."""
        ...

    async def remove_file(self, cid: str, path: str, user: str = "root") -> None:
        """Remove `path`, a folder with all it holds; a link itself, never what it leads to."""
        ...

    async def signal(self, cid: str, name: str, sig: str) -> None:
        """`sig` (TERM, KILL, INT, HUP) to the process started `inbox.noted` as `name` and
        everything it started; nothing when there is none."""
        ...

    async def trust(self, cid: str, name: str, pem: bytes) -> None:
        """Make the box's TLS clients trust this CA certificate (`inbox.trust`)."""
        ...


class ImageEngine(Protocol):
    """Building and importing images (the box image and its base)."""

    async def image_exists(self, ref: str) -> bool: ...

    async def image_labels(self, ref: str) -> dict[str, str] | None: ...

    async def import_tarball(self, path: Path, ref: str) -> None: ...

    def build(
        self,
        context: Path,
        dockerfile: str,
        tag: str,
        buildargs: dict[str, str],
        nocache: bool,
        labels: dict[str, str] | None = None,
    ) -> AsyncIterator[str]: ...


class BoxEngine(Runtime, ImageEngine, Protocol):
    """One engine for both jobs, as the composition root hands it out."""
