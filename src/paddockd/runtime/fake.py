"""An in-memory engine for unit tests: containers are dicts, exec echoes its argv, and each
container's files are an in-memory filesystem that answers as a real box does
(runtime/fakefs.py)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..domain.errors import Conflict, InvalidRequest, NotFound
from .base import (
    LABEL_BOX,
    LABEL_INSTANCE,
    STDERR,
    STDOUT,
    ContainerInfo,
    ContainerSpec,
    DiskSink,
    DiskSource,
    DiskUsage,
    EngineInfo,
    ExecSpec,
    FileInfo,
    ImageInfo,
    Placement,
    Usage,
    VolumeInfo,
)
from .cgroups import Sample
from .fakefs import FakeFiles, gathered


class FakeExec:
    def __init__(self, spec: ExecSpec) -> None:
        self.spec = spec
        self.stdin = b""
        self.killed = False

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        cmd = self.spec.cmd
        if cmd[0] == "fail":
            yield STDERR, b"failed\n"
        else:
            yield STDOUT, (" ".join(cmd) + "\n").encode()

    async def wait(self) -> int:
        return 3 if self.spec.cmd[0] == "fail" else 0

    async def write(self, data: bytes) -> None:
        self.stdin += data

    async def close_stdin(self) -> None:
        pass

    async def resize(self, cols: int, rows: int) -> None:
        pass

    async def kill(self) -> None:
        self.killed = True

    async def close(self) -> None:
        pass


class HostNetwork:
    """The fake's "box network": the test's own, so a test's loopback server is the box's."""

    closed = False

    def spare(self) -> socket.socket | None:
        return None

    def socket(self) -> socket.socket:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)

    def close(self) -> None:
        self.closed = True


class FakeRuntime:
    def __init__(self) -> None:
        self.by_id: dict[str, dict[str, Any]] = {}
        self.images: set[str] = {"paddock-box:latest"}
        self.userns_base = 200000
        self.files: dict[tuple[str, str], bytes] = {}
        self.execs: list[ExecSpec] = []
        self.labels: dict[str, dict[str, str]] = {}
        self.created: dict[str, float] = {}  # image -> Unix time; absent: long ago
        self.calls: list[str] = []
        self.volume_by_name: dict[str, VolumeInfo] = {}
        self.released_run_folders: list[Path] = []
        self.volume_sizes: dict[str, int | None] = {}
        self.swept = 0
        self._fs: dict[str, FakeFiles] = {}
        self.signals: list[tuple[str, str, str]] = []
        self.fail_next: dict[str, Exception] = {}
        self.views = True  # whether LXCFS "answers"
        self.stale: set[str] = set()  # containers whose views died with an old LXCFS
        self.readings: dict[str, int] = {}  # samples() taken of each container
        # An image's id is its name, unless a test "rebuilt" it (name -> new id).
        self.image_ids: dict[str, str] = {}
        self.copies = False  # whether boxes' disks are copied (reflinks) here
        self.saved: dict[str, str] = {}  # saved disk -> the container (or disk) copied
        self._n = 0

    def _maybe_fail(self, op: str) -> None:
        self.calls.append(op)
        if op in self.fail_next:
            raise self.fail_next.pop(op)

    async def info(self) -> EngineInfo:
        self._maybe_fail("info")
        return EngineInfo("fake", "userns", self.userns_base)

    async def ensure_network(self) -> None:
        pass

    async def image_id(self, ref: str) -> str | None:
        # By name or by id, as the engine answers.
        if ref in self.images:
            return f"sha256:{self.image_ids.get(ref, ref)}"
        return ref if await self.image_exists(ref) else None

    async def image_exists(self, ref: str) -> bool:
        # By name or by id, as the engine answers.
        return ref in self.images or any(
            ref == f"sha256:{self.image_ids.get(r, r)}" for r in self.images
        )

    async def image_labels(self, ref: str) -> dict[str, str] | None:
        return dict(self.labels.get(ref, {})) if ref in self.images else None

    async def remove_image(self, ref: str) -> None:
        self.images.discard(ref.removeprefix("sha256:"))  # an image's fake id is its name

    async def list_images(self, labels: dict[str, str]) -> list[ImageInfo]:
        return [
            ImageInfo(f"sha256:{ref}", (ref,), self.created.get(ref, 0.0), self.labels[ref])
            for ref in sorted(self.images)
            if ref in self.labels and all(self.labels[ref].get(k) == v for k, v in labels.items())
        ]

    async def create(self, spec: ContainerSpec) -> str:
        self._maybe_fail("create")
        by_id = {f"sha256:{self.image_ids.get(r, r)}": r for r in self.images}
        if spec.image not in self.images and spec.image not in by_id:
            raise NotFound(f"no such image: {spec.image}")
        if spec.disk is not None and spec.disk not in self.saved:
            raise NotFound(f"no saved disk {spec.disk}")
        if any(c.get("name") == f"paddock-{spec.box_id}" for c in self.by_id.values()):
            # The engine's container names are per box (paddock-<box id>).
            raise Conflict(f'the container name "/paddock-{spec.box_id}" is already in use')
        for m in spec.mounts:  # as the engine's: a volume with a size is recorded first
            if m.size_mb and m.volume not in self.volume_by_name:
                labels = {LABEL_INSTANCE: spec.labels.get(LABEL_INSTANCE, "")}
                await self.create_volume(m.volume, labels, m.size_mb << 20)
        self._n += 1
        cid = f"c{self._n:04d}"
        self.by_id[cid] = {
            "spec": spec,
            "running": False,
            "labels": {LABEL_BOX: spec.box_id, **spec.labels},
            "views": self.views,
            "image_id": spec.image
            if spec.image in by_id
            else f"sha256:{self.image_ids.get(spec.image, spec.image)}",
            "hostname": spec.hostname,  # what the box's hostname is now
            "name": f"paddock-{spec.box_id}",
        }
        return cid

    def _get(self, cid: str) -> dict[str, Any]:
        if cid not in self.by_id:
            raise NotFound(f"no such container: {cid}")
        return self.by_id[cid]

    async def start(self, cid: str) -> None:
        self._maybe_fail("start")
        c = self._get(cid)
        c["running"] = True
        c["hostname"] = c["spec"].hostname  # as the engine does at every start

    async def set_hostname(self, cid: str, hostname: str) -> None:
        self._maybe_fail("set_hostname")
        c = self._get(cid)
        if not c["running"]:
            raise InvalidRequest(f"container {cid} is not running")
        c["hostname"] = hostname

    async def stop(self, cid: str, timeout: int) -> None:
        self._maybe_fail("stop")
        self._get(cid)["running"] = False

    async def remove(self, cid: str) -> None:
        self._maybe_fail("remove")
        self.by_id.pop(cid, None)

    async def retire(self, cid: str) -> None:
        self._maybe_fail("retire")
        self._get(cid)["name"] = f"retired-{cid}"

    async def sweep(self) -> None:
        self.swept += 1

    async def inspect(self, cid: str) -> ContainerInfo | None:
        c = self.by_id.get(cid)
        if c is None:
            return None
        status = "running" if c["running"] else "exited"
        ip = f"10.213.0.{int(cid[1:]) + 1}"
        box = c["labels"][LABEL_BOX]
        return ContainerInfo(
            cid,
            box,
            c["running"],
            status,
            c["spec"].image,
            ip,
            views=c["views"],
            hostname=c["spec"].hostname,
            image_id=c["image_id"],
            labels=dict(c["labels"]),
        )

    async def usage(self, cids: list[str]) -> dict[str, Usage]:
        return {
            cid: Usage(12.5, 100 << 20, self._get(cid)["spec"].memory_mb << 20, 9, 1024, 4096)
            for cid in cids
            if cid in self.by_id and self.by_id[cid]["running"]
        }

    async def samples(self, cids: list[str]) -> dict[str, Sample]:
        # Each reading a second and half a CPU-second on from the last: 50 %.
        out = {}
        for cid in cids:
            if cid in self.by_id and self.by_id[cid]["running"]:
                n = self.readings[cid] = self.readings.get(cid, 0) + 1
                limit = self._get(cid)["spec"].memory_mb << 20
                out[cid] = Sample(n * 10**9, n * 5 * 10**8, 100 << 20, limit, 9, 1024)
        return out

    async def views_available(self) -> bool:
        return self.views

    async def stale_views(self, cid: str) -> bool:
        return cid in self.stale

    async def containers(self, labels: dict[str, str]) -> list[ContainerInfo]:
        out = []
        for cid, c in self.by_id.items():
            if all(c["labels"].get(k) == v for k, v in labels.items()):
                info = await self.inspect(cid)
                assert info is not None
                out.append(info)
        return out

    async def running(self, labels: dict[str, str]) -> list[ContainerInfo]:
        return [info for info in await self.containers(labels) if info.running]

    async def commit(self, cid: str, repository: str, tag: str) -> str:
        self._maybe_fail("commit")
        ref = f"{repository}:{tag}"
        self.images.add(ref)
        self.labels[ref] = dict(self._get(cid)["labels"])
        return f"sha256:{repository}:{tag}"

    async def layer_size(self, ref: str) -> int:
        return 4096 if ref in self.images else 0

    async def copies_disks(self) -> bool:
        return self.copies

    async def save_disk(self, cid: str, key: str) -> bool:
        self._maybe_fail("save_disk")
        self._get(cid)
        if not self.copies:
            return False
        self.saved[key] = cid
        return True

    async def load_disk(self, cid: str, key: str) -> bool:
        self._maybe_fail("load_disk")
        c = self._get(cid)
        if not self.copies:
            return False
        if key not in self.saved:
            raise NotFound(f"no saved disk {key}")
        c["spec"] = replace(c["spec"], disk=key)  # from its next start, as the engine's
        return True

    async def copy_disk(self, source: str, key: str) -> None:
        self._maybe_fail("copy_disk")
        if source not in self.saved:
            raise NotFound(f"no saved disk {source}")
        self.saved[key] = self.saved[source]

    async def drop_disk(self, key: str) -> None:
        folder, _, name = key.partition("/")
        every = name == "*"
        for gone in [k for k in self.saved if k == key or (every and k.startswith(folder + "/"))]:
            del self.saved[gone]

    async def saved_disks(self) -> set[str]:
        return set(self.saved)

    async def disk_usage(self, keys: list[str]) -> dict[str, DiskUsage]:
        return {k: DiskUsage(4096, 1 << 20) for k in keys if k in self.saved}

    async def open_disk(self, key: str) -> DiskSource:
        if key not in self.saved:
            raise NotFound(f"no saved disk {key}")
        return _FakeDisk(self.saved[key].encode())

    async def new_disk(self, key: str, size: int) -> DiskSink:
        self._maybe_fail("new_disk")
        if key in self.saved:
            raise Conflict(f"saved disk {key} exists")
        return _FakeSink(self.saved, key, size)

    async def create_volume(
        self, name: str, labels: dict[str, str], size: int | None = None
    ) -> VolumeInfo:
        self.volume_sizes[name] = size
        self.volume_by_name[name] = VolumeInfo(name, labels, f"/fake/{name}")
        return self.volume_by_name[name]

    async def remove_volume(self, name: str) -> None:
        self.volume_by_name.pop(name, None)

    async def release_run_folder(self, folder: Path) -> None:
        self.released_run_folders.append(folder)

    async def volumes(self, labels: dict[str, str]) -> list[VolumeInfo]:
        return [
            v
            for v in self.volume_by_name.values()
            if all(v.labels.get(k) == val for k, val in labels.items())
        ]

    async def volume_usage(self, volume: VolumeInfo) -> int:
        return 1234

    async def volume_folder(self, volume: VolumeInfo) -> str:
        return volume.mountpoint

    async def exec(self, cid: str, spec: ExecSpec) -> FakeExec:
        self._maybe_fail("exec")
        self._get(cid)
        self.execs.append(spec)
        return FakeExec(spec)

    async def warm_exec(self, cid: str) -> None:
        self._get(cid)
        self.calls.append("warm_exec")

    async def logs(self, cid: str, tail: int = 0) -> str:
        self._maybe_fail("logs")
        lines: list[str] = self._get(cid).get("log", [])  # set by a test
        return "".join(lines[-tail:] if tail else lines)

    async def open_network(self, cid: str) -> HostNetwork:
        if not self._get(cid).get("running"):
            raise InvalidRequest(f"container {cid} is not running")
        return HostNetwork()

    # -- files: an in-memory filesystem per container (runtime/fakefs.py) ---------------
    def fs(self, cid: str) -> FakeFiles:
        self._get(cid)
        return self._fs.setdefault(cid, FakeFiles())

    async def put_archive(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int],
        chunks: AsyncIterator[bytes],
        place: Placement | None = None,
    ) -> str:
        self._maybe_fail("put_archive")
        if place is not None:
            data = await gathered(chunks)
            self.files[(cid, path)] = data
            return self.fs(cid).copy(path, owner, place, data)
        try:
            self.fs(cid).make_dirs(path, owner)
        except InvalidRequest as exc:  # worded as the box's program words it
            raise InvalidRequest(
                f"cannot use {path} in the box as a folder: {exc.message}"
            ) from None
        data = await gathered(chunks)
        self.files[(cid, path)] = data
        self.fs(cid).put(path, data)
        return path

    async def write_file(
        self, cid: str, path: str, owner: tuple[int, int], chunks: AsyncIterator[bytes]
    ) -> FileInfo:
        data = await gathered(chunks)
        self.files[(cid, path)] = data
        return self.fs(cid).write(path, owner, data)

    async def get_archive(self, cid: str, path: str) -> tuple[AsyncIterator[bytes], FileInfo]:
        data, info = self.fs(cid).get(path)

        async def chunks() -> AsyncIterator[bytes]:
            yield data

        return chunks(), info

    async def stat_file(self, cid: str, path: str, user: str = "root") -> FileInfo | None:
        return self.fs(cid).info(path)

    async def list_files(
        self, cid: str, path: str, depth: int, limit: int, user: str = "root"
    ) -> list[FileInfo]:
        return self.fs(cid).listing(path, depth, limit)

    async def make_dirs(
        self,
        cid: str,
        path: str,
        owner: tuple[int, int] | None,
        user: str = "root",
        new: bool = False,
    ) -> None:
        self.fs(cid).make_dirs(path, owner, new)

    async def move_file(self, cid: str, src: str, dest: str, user: str = "root") -> None:
        self.fs(cid).move(src, dest)

    async def remove_file(self, cid: str, path: str, user: str = "root") -> None:
        self.fs(cid).remove(path)

    async def signal(self, cid: str, name: str, sig: str) -> None:
        self._get(cid)
        self.signals.append((cid, name, sig))

    async def trust(self, cid: str, name: str, pem: bytes) -> None:
        self._get(cid)
        self.fs(cid).write(f"/usr/local/share/ca-certificates/{name}.crt", (0, 0), pem)

    async def import_tarball(self, path: Path, ref: str) -> None:
        self.images.add(ref)

    async def build(
        self,
        context: Path,
        dockerfile: str,
        tag: str,
        buildargs: dict[str, str],
        nocache: bool,
        labels: dict[str, str] | None = None,
    ) -> AsyncIterator[str]:
        self.images.add(tag)
        self.labels[tag] = dict(labels or {})
        yield f"built {tag} from {dockerfile}\n"


FAKE_DISK = 1 << 20  # a fake saved disk's size: its copied container's id, then a hole


class _FakeDisk:
    def __init__(self, data: bytes) -> None:
        self.size, self._data = FAKE_DISK, data

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        yield 0, self._data

    def close(self) -> None:
        pass


class _FakeSink:
    """A disk written in memory: once committed, saved as what its first bytes name."""

    def __init__(self, saved: dict[str, str], key: str, size: int) -> None:
        self._saved, self._key, self._data = saved, key, bytearray(size)

    def write(self, offset: int, data: bytes) -> None:
        if offset + len(data) > len(self._data):
            raise ValueError("data past the end of the disk")
        self._data[offset : offset + len(data)] = data

    def commit(self) -> None:
        if not self._data.strip(b"\0"):
            raise ValueError("the disk holds no ext4 filesystem")
        self._saved[self._key] = self._data.rstrip(b"\0").decode(errors="replace")

    def abort(self) -> None:
        pass
