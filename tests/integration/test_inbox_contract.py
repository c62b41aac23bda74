"""One set of file cases, run on the real runtime (a real box: runtime/inbox.py's script in
it) and on the fake (runtime/fakefs.py): what the unit tests learn from the fake is what a
box does. Each case says the answer and the error of each operation of the runtime port."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from paddockd.domain.errors import Conflict, InvalidRequest, NotFound, PaddockError
from paddockd.runtime.base import ContainerSpec, Placement, Runtime
from paddockd.runtime.docker import DockerRuntime
from paddockd.runtime.fake import FakeRuntime

from ..harness import ENGINE_SOCKET
from .conftest import Server

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(params=["fake", "docker"])
def runtime(request: pytest.FixtureRequest, server: Server) -> Iterator[tuple[Runtime, str]]:
    if request.param == "fake":
        fake = FakeRuntime()
        spec = ContainerSpec("b1", "b1", "paddock-box:latest", 1, 512, 64, run_dir=None)  # type: ignore[arg-type]
        cid = anyio.run(fake.create, spec)
        yield fake, cid
        return
    name = f"ct-{uuid.uuid4().hex[:6]}"
    with server.client() as c:
        box = c.create_box(name, ttl=600)
    try:
        yield DockerRuntime(ENGINE_SOCKET), f"paddock-{box.id}"
    finally:
        with server.client() as c:
            c.delete_box(name, force=True)


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _tar(*members: tuple[str, str, bytes | str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 1000
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, str(data)
                tar.addfile(info)
            else:
                payload = data if isinstance(data, bytes) else data.encode()
                info.size, info.mode = len(payload), 0o640
                tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def test_the_fake_answers_as_a_box_does(runtime: tuple[Runtime, str]) -> None:
    rt, cid = runtime

    async def cases() -> None:
        home = await rt.stat_file(cid, "/config")
        assert home is not None and (home.kind, home.uid, home.gid) == ("dir", 1000, 1000)
        assert await rt.stat_file(cid, "/config/nothing") is None

        made = await rt.write_file(cid, "/config/c/a.txt", (1000, 1000), _one(b"hello"))
        assert (made.path, made.kind, made.size, made.mode, made.uid) == (
            "/config/c/a.txt", "file", 5, 0o644, 1000,
        )  # fmt: skip
        folder = await rt.stat_file(cid, "/config/c")
        assert folder is not None and (folder.kind, folder.uid) == ("dir", 1000)
        assert await rt.stat_file(cid, "/config/c/a.txt/x") is None  # through a file
        with pytest.raises(InvalidRequest, match="is a folder"):
            await rt.write_file(cid, "/config/c", (1000, 1000), _one(b"x"))

        listed = await rt.list_files(cid, "/config/c", 1, 100)
        assert [(i.path, i.kind, i.size) for i in listed] == [("/config/c/a.txt", "file", 5)]
        with pytest.raises(InvalidRequest, match="not a folder"):
            await rt.list_files(cid, "/config/c/a.txt", 1, 100)
        with pytest.raises(NotFound):
            await rt.list_files(cid, "/config/none", 1, 100)

        await rt.make_dirs(cid, "/config/c/d/e", (1000, 1000))
        deep = await rt.stat_file(cid, "/config/c/d/e")
        assert deep is not None and (deep.kind, deep.uid) == ("dir", 1000)
        await rt.make_dirs(cid, "/config/c/d/e", (1000, 1000))  # there already: fine
        with pytest.raises(Conflict):
            await rt.make_dirs(cid, "/config/c/d/e", None, new=True)
        with pytest.raises(InvalidRequest, match="not a folder"):
            await rt.make_dirs(cid, "/config/c/a.txt/f", None)
        depth2 = await rt.list_files(cid, "/config/c", 2, 100)
        assert sorted(i.path for i in depth2) == [
            "/config/c/a.txt", "/config/c/d", "/config/c/d/e",
        ]  # fmt: skip

        await rt.move_file(cid, "/config/c/a.txt", "/config/c/moved/b.txt")
        assert await rt.stat_file(cid, "/config/c/a.txt") is None
        moved = await rt.stat_file(cid, "/config/c/moved/b.txt")
        assert moved is not None and moved.size == 5
        with pytest.raises(NotFound):
            await rt.move_file(cid, "/config/c/none", "/config/c/x")

        archive = _tar(
            ("src", "dir", b""), ("src/f.txt", "file", "data"), ("src/l", "link", "f.txt")
        )
        await rt.put_archive(cid, "/config/p", (1000, 1000), _one(archive))  # made first
        made = await rt.stat_file(cid, "/config/p")
        assert made is not None and (made.kind, made.uid, made.gid) == ("dir", 1000, 1000)
        f = await rt.stat_file(cid, "/config/p/src/f.txt")
        assert f is not None and (f.kind, f.size, f.mode, f.uid, f.gid) == (
            "file",
            4,
            0o640,
            1000,
            1000,
        )
        link = await rt.stat_file(cid, "/config/p/src/l")
        assert link is not None and (link.kind, link.link, link.leads_to) == (
            "symlink",
            "f.txt",
            "file",
        )
        assert link.resolved == "/config/p/src/f.txt"
        mine = (1000, 1000)
        with pytest.raises(InvalidRequest, match="a file cannot replace it"):
            await rt.put_archive(cid, "/config/p", mine, _one(_tar(("src", "file", "x"))))
        with pytest.raises(InvalidRequest, match="a folder cannot replace it"):
            await rt.put_archive(cid, "/config/p", mine, _one(_tar(("src/f.txt", "dir", b""))))
        with pytest.raises(InvalidRequest, match="not a valid tar"):
            await rt.put_archive(cid, "/config/p", mine, _one(b"x" * 1024))
        with pytest.raises(
            InvalidRequest, match=r"cannot use /config/p/src/f\.txt/in .* as a folder"
        ):
            await rt.put_archive(cid, "/config/p/src/f.txt/in", mine, _one(archive))

        chunks, top = await rt.get_archive(cid, "/config/p/src")
        data = b"".join([c async for c in chunks])
        assert (top.path, top.kind) == ("/config/p/src", "dir")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            assert tar.getnames() == ["src", "src/f.txt", "src/l"]
        with pytest.raises(NotFound):
            await rt.get_archive(cid, "/config/p/none")

        await rt.remove_file(cid, "/config/c")
        assert await rt.stat_file(cid, "/config/c") is None
        with pytest.raises(NotFound):
            await rt.remove_file(cid, "/config/c")

    anyio.run(cases)


CASES = json.loads((Path(__file__).parents[2] / "spec" / "placement_cases.json").read_text())
ERRORS: dict[str, type[PaddockError]] = {"InvalidRequest": InvalidRequest, "NotFound": NotFound}


def _source_tar(sources: list[dict[str, str]]) -> tuple[bytes, Placement]:
    """The tar a push of these SRCs sends, and how the box places it (paddock/_client.py)."""
    members: list[tuple[str, str, bytes | str]] = []
    for src in sources:
        contents = src["path"] == "." or src["path"].endswith("/.")
        top = "" if contents else src["name"] + "/"
        if src["kind"] == "file":
            members.append((src["name"], "file", "a file"))
        else:
            if not contents:
                members.append((src["name"], "dir", b""))
            members.append((f"{top}{src['name']}.txt", "file", "in a folder"))
    whole = len(sources) == 1 and not sources[0]["path"].endswith(".")
    place = Placement(sources[0]["kind"], sources[0]["name"]) if whole else Placement("into")  # type: ignore[arg-type]
    return _tar(*members), place


async def _arrange(rt: Runtime, cid: str, root: str, dest: dict[str, str | None]) -> str:
    """DEST and its folder as the case says, under `root`; DEST's path there."""
    path = (
        root + str(dest["path"]) if str(dest["path"]).startswith("/") else f"{root}/{dest['path']}"
    )
    await rt.make_dirs(cid, root, (1000, 1000))
    stripped = path.rstrip("/") or "/"
    parent = stripped.rsplit("/", 1)[0]
    if dest["parent"] == "dir":
        await rt.make_dirs(cid, parent, (1000, 1000))
    elif dest["parent"] == "file":
        await rt.write_file(cid, parent, (1000, 1000), _one(b"x"))
    if dest["kind"] == "dir":
        await rt.make_dirs(cid, stripped, (1000, 1000))
    elif dest["kind"] == "file":
        await rt.write_file(cid, stripped, (1000, 1000), _one(b"was here"))
    return path


def test_a_copy_lands_by_the_rules_both_sdks_share(runtime: tuple[Runtime, str]) -> None:
    """The box places a push itself (runtime/inbox.py `copy`), by the same table the SDKs
    check their own placing against: same landing, same refusals."""
    rt, cid = runtime
    owner = (1000, 1000)

    async def landed(root: str, sources: list[dict[str, str]], dest: dict[str, str | None]) -> str:
        archive, place = _source_tar(sources)
        path = await _arrange(rt, cid, root, dest)
        return await rt.put_archive(cid, path, owner, _one(archive), place)

    async def cases() -> None:
        n = 0
        for case in CASES["lands"]:
            n += 1
            root = f"/config/pc{n}"
            got = await landed(root, [case["source"]], case["dest"])
            want = case["landing"]["path"]
            want = root + want if want.startswith("/") else f"{root}/{want}"
            assert got == want.rstrip("/") or got == want, case
            src = case["source"]
            inside = src["name"] + ".txt"
            there = await rt.stat_file(cid, got if src["kind"] == "file" else f"{got}/{inside}")
            assert there is not None and there.kind == "file", case
        for case in CASES["refused"]:
            if case["source"]["kind"] == "file" and case["source"]["path"].endswith("."):
                continue  # the SDK's own refusal: a file has no contents
            n += 1
            message = case["message"].replace(CASES["where"], " in the box")
            with pytest.raises(ERRORS[case["error"]]) as err:
                await landed(f"/config/pc{n}", [case["source"]], case["dest"])
            assert message.replace("/", f"/config/pc{n}/", 1) in err.value.message, case
        several = CASES["several"]
        for key in ("into_missing", "into_folder"):
            n += 1
            got = await landed(f"/config/pc{n}", several["sources"], several[key])
            assert got == f"/config/pc{n}/out"
            names = {i.name for i in await rt.list_files(cid, got, 1, 100)}
            assert names == {"a", "b.txt", "c.txt"}
        for key in ("onto_file", "missing_parent"):
            n += 1
            dest, error, message = several[key]
            with pytest.raises(ERRORS[error]) as err:
                await landed(f"/config/pc{n}", several["sources"], dest)
            message = message.replace(CASES["where"], " in the box")
            assert message.replace("/", f"/config/pc{n}/", 1) in err.value.message, key

    anyio.run(cases)
