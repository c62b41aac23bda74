"""A box's filesystem in memory, for the fake runtime: the same file operations as
runtime/inbox.py does in a real box, with the same answers and errors (the contract test,
tests/integration/test_inbox_contract.py, runs one set of cases on both). As root: it
checks no permissions."""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..domain.errors import Conflict, InvalidRequest, NotFound
from .base import FileInfo, FileKind, Placement

HOME = "/config"


@dataclass
class Node:
    kind: FileKind
    mode: int
    uid: int = 0
    gid: int = 0
    data: bytes = b""
    link: str = ""
    mtime: float = field(default_factory=time.time)


def _norm(path: str) -> str:
    return posixpath.normpath("/" + path.lstrip("/"))


class FakeFiles:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {
            "/": Node("dir", 0o755),
            "/tmp": Node("dir", 0o1777),
            HOME: Node("dir", 0o755, 1000, 1000),
        }

    # -- looking ------------------------------------------------------------------------
    def _parent_ok(self, path: str) -> bool:
        parent = posixpath.dirname(path)
        return path == "/" or (parent in self.nodes and self.nodes[parent].kind == "dir")

    def info(self, path: str) -> FileInfo | None:
        path = _norm(path)
        node = self.nodes.get(path)
        if node is None or not self._parent_ok(path):
            return None
        size = len(node.data) if node.kind == "file" else len(node.link) if node.link else 4096
        info = FileInfo(
            path, node.kind, size, node.mode, node.mtime, node.uid, node.gid, link=node.link
        )
        if node.kind == "symlink":
            target = _norm(posixpath.join(posixpath.dirname(path), node.link))
            leads = self.nodes.get(target)
            return FileInfo(
                **{
                    **info.__dict__,
                    "leads_to": leads.kind if leads else "missing",
                    "resolved": target,
                }
            )
        return info

    def _there(self, path: str) -> FileInfo:
        found = self.info(path)
        if found is None:
            raise NotFound(f"no such file or directory in the box: {path}")
        return found

    def listing(self, path: str, depth: int, limit: int) -> list[FileInfo]:
        path = _norm(path)
        if self._there(path).kind != "dir":
            raise InvalidRequest(f"{path} in the box is not a folder (or a part of it is not)")
        base = path.rstrip("/") + "/"
        found = []
        for name in sorted(self.nodes):
            if name.startswith(base) and name[len(base) :].count("/") < depth:
                found.append(self._there(name))
        return found[:limit]

    # -- changing -----------------------------------------------------------------------
    def make_dirs(self, path: str, owner: tuple[int, int] | None, new: bool = False) -> None:
        path = _norm(path)
        if new and path in self.nodes:
            raise Conflict(f"{path} exists already in the box")
        uid, gid = owner or (0, 0)
        made = ""
        for part in path.strip("/").split("/"):
            if not part:
                continue
            made += "/" + part
            node = self.nodes.get(made)
            if node is None:
                self.nodes[made] = Node("dir", 0o755, uid, gid)
            elif node.kind != "dir":
                raise InvalidRequest(f"{path} in the box is not a folder (or a part of it is not)")

    def move(self, src: str, dest: str) -> None:
        src, dest = _norm(src), _norm(dest)
        self._there(src)
        self.make_dirs(posixpath.dirname(dest), None)
        self._drop(dest)
        for name in [n for n in self.nodes if n == src or n.startswith(src + "/")]:
            self.nodes[dest + name[len(src) :]] = self.nodes.pop(name)

    def remove(self, path: str) -> None:
        self._there(path)
        self._drop(_norm(path))

    def _drop(self, path: str) -> None:
        for name in [n for n in self.nodes if n == path or n.startswith(path + "/")]:
            del self.nodes[name]

    def write(self, path: str, owner: tuple[int, int], data: bytes) -> FileInfo:
        path = _norm(path)
        self.make_dirs(posixpath.dirname(path), owner)
        node = self.nodes.get(path)
        if node is not None and node.kind == "dir":
            raise InvalidRequest(f"{path} in the box is a folder, not a file")
        if node is None:
            node = self.nodes[path] = Node("file", 0o644, *owner)
        node.data, node.mtime = data, time.time()
        return self._there(path)

    def put(self, dest: str, archive: bytes) -> None:
        """Unpack a tar into the folder `dest`, by docker cp's rules."""
        dest = _norm(dest)
        if self._there(dest).kind != "dir":
            raise InvalidRequest(f"{dest} in the box is not a folder (or a part of it is not)")
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
                self._unpack(dest, tar)
        except tarfile.TarError as exc:
            raise InvalidRequest(f"the request body is not a valid tar archive ({exc})") from None

    def copy(self, dest: str, owner: tuple[int, int], place: Placement, archive: bytes) -> str:
        """Place a tar at `dest` by docker cp's rules, as runtime/inbox.py's `copy` does."""
        path = _norm(dest)
        parent, name = posixpath.dirname(path), posixpath.basename(path)
        kind = self._followed(path)
        if kind == "dir":
            self.put(path, archive)
            return path if place.kind == "into" else posixpath.join(path, place.name)
        if kind is not None:
            if place.kind == "dir":
                raise InvalidRequest(
                    f"cannot copy the folder {place.name} onto the file {path} in the box"
                )
            if place.kind == "into":
                raise InvalidRequest(
                    f"{path} in the box is a file; a folder's contents or several sources "
                    "need a folder"
                )
            if dest.endswith("/"):
                raise InvalidRequest(f"{dest} in the box is not a folder")
        else:
            if dest.endswith("/") and place.kind == "file":
                raise NotFound(f"no such folder in the box: {dest} (DEST ends in /)")
            up = self._followed(parent)
            if up != "dir":
                if up is None:
                    raise NotFound(f"no such folder in the box: {parent}")
                raise InvalidRequest(f"{parent} in the box is not a folder")
            if place.kind == "into":
                self.make_dirs(path, owner)
                self.put(path, archive)
                return path
        if name == place.name:
            self.put(parent, archive)
            return path
        aside = posixpath.join(parent, ".paddock-copy")  # unpacked aside, then moved
        self.make_dirs(aside, None)
        try:
            self.put(aside, archive)
            self.move(posixpath.join(aside, place.name), path)
        finally:
            self._drop(aside)
        return path

    def _followed(self, path: str) -> FileKind | None:
        """What is at `path`, a link followed; None for nothing (or a dangling link)."""
        found = self.info(path)
        if found is None or found.leads_to == "missing":
            return None
        return found.leads_to or found.kind

    def _unpack(self, dest: str, tar: tarfile.TarFile) -> None:
        for m in tar.getmembers():
            path = _norm(posixpath.join(dest, m.name))
            there = self.nodes.get(path)
            if there is not None and (there.kind == "dir") != m.isdir():
                what, other = (
                    ("a folder", "a file") if there.kind == "dir" else ("a file", "a folder")
                )
                raise InvalidRequest(
                    f"{path} in the box is {what}: {other} cannot replace it (remove it first)"
                )
            if m.isdir():
                self.nodes[path] = Node("dir", m.mode & 0o7777, m.uid, m.gid, mtime=m.mtime)
            elif m.issym():
                self.nodes[path] = Node("symlink", 0o777, m.uid, m.gid, link=m.linkname)
            elif m.isfile():
                extracted = tar.extractfile(m)
                data = extracted.read() if extracted else b""
                self.nodes[path] = Node("file", m.mode & 0o7777, m.uid, m.gid, data, mtime=m.mtime)

    def get(self, path: str) -> tuple[bytes, FileInfo]:
        """A tar of `path` (its base name on top, in name order) and what it is."""
        top = self._there(path)
        path = _norm(path)
        buf = io.BytesIO()
        base = posixpath.basename(path) or "."
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(n for n in self.nodes if n == path or n.startswith(path + "/")):
                node = self.nodes[name]
                member = tarfile.TarInfo(base + name[len(path) :])
                member.mode, member.uid, member.gid = node.mode, node.uid, node.gid
                member.mtime = int(node.mtime)
                if node.kind == "dir":
                    member.type = tarfile.DIRTYPE
                    tar.addfile(member)
                elif node.kind == "symlink":
                    member.type, member.linkname = tarfile.SYMTYPE, node.link
                    tar.addfile(member)
                else:
                    member.size = len(node.data)
                    tar.addfile(member, io.BytesIO(node.data))
        return buf.getvalue(), top


async def gathered(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([c async for c in chunks])
