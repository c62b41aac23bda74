"""Export and import through the services, on the fake engine (whose saved disks are the
names of what they copied): a box file makes a box with the same files and settings; a
refusal (name, image, owners, a damaged file) leaves nothing, and comes before the disk
is read where it can. The real round trip is tests/integration/test_portable.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from paddockd.domain.errors import CapacityExceeded, Conflict, InvalidState, NotFound
from paddockd.domain.network import policy
from paddockd.services.box_archive import BadArchive
from paddockd.services.portable import IMPORTS_AT_ONCE

from ..conftest import World, join

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def copying(world: World) -> World:
    world.runtime.copies = True
    return world


async def _export(w: World, ref: str, snap: str | None = None) -> list[bytes]:
    export = await w.services.portable.export(ref, snap)
    return [piece async for piece in export.chunks]


class Body:
    """A request body that counts what was taken of it."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces, self.taken = pieces, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.taken += 1
            yield piece


def _left(w: World) -> list[str]:
    return [k for k in w.runtime.saved if k.startswith("imports/") or k.startswith("forks/")]


async def test_an_exported_box_imports_with_its_files_and_settings(copying: World) -> None:
    w = copying
    net = policy("deny-all")
    src = await w.boxes.create("src", None, 900, None, network=net, keep=4)
    pieces = await _export(w, "src")
    made = await w.services.portable.import_box(Body(pieces).__aiter__(), "copy", None, False)
    assert (made.type, made.ttl, made.keep, made.network) == (src.type, 900, 4, net)
    # Its disk is a copy of what the export read: the source container's disk.
    snap = (await w.repo.snapshots(made.id))[0]
    assert w.runtime.saved[snap.disk or ""] == src.container_id
    assert _left(w) == []  # the export's copy and the import's disk are gone


async def test_a_snapshot_exports_as_it_was(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)
    snap = await w.services.snapshots.take("src", "first")
    export = await w.services.portable.export("src", "first")
    assert export.manifest.snapshot == snap.seq and export.filename == "src-1.paddock"


async def test_a_name_taken_is_refused_before_the_disk_is_read(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)
    pieces = await _export(w, "src")
    # The header comes on its own; what follows it is never read (the decompressor may
    # read ahead one piece).
    body = Body([pieces[0], *[b"\0" * 65536] * 100])
    with pytest.raises(Conflict, match="already exists"):
        await w.services.portable.import_box(body.__aiter__(), "src", None, False)
    assert body.taken <= 2 and _left(w) == []


async def test_a_damaged_file_leaves_nothing(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)
    pieces = await _export(w, "src")
    damaged = bytearray(b"".join(pieces))
    damaged[len(damaged) - 10] ^= 1
    before = [b.name for b in await w.repo.all()]
    with pytest.raises(BadArchive):
        await w.services.portable.import_box(Body([bytes(damaged)]).__aiter__(), "c", None, False)
    assert [b.name for b in await w.repo.all()] == before and _left(w) == []


async def test_another_image_is_refused_unless_rebased(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)
    pieces = await _export(w, "src")
    # The box image was rebuilt since: the one the box was made over is not here.
    w.runtime.image_ids["paddock-box:latest"] = "b" * 64
    with pytest.raises(Conflict, match="--rebase") as refused:
        await w.services.portable.import_box(Body(pieces).__aiter__(), "c", None, False)
    assert refused.value.code == "image_mismatch"
    made = await w.services.portable.import_box(Body(pieces).__aiter__(), "c", None, True)
    assert made.image == "sha256:" + "b" * 64


async def test_files_owned_from_another_uid_range_are_refused(copying: World) -> None:
    w = copying
    await w.boxes.create("src", None, None, None)
    pieces = await _export(w, "src")
    w.runtime.userns_base = 300000
    with pytest.raises(Conflict) as refused:
        await w.services.portable.import_box(Body(pieces).__aiter__(), "c", None, False)
    assert refused.value.code == "owners_mismatch"


async def test_a_server_without_disk_copies_says_so(world: World) -> None:
    await world.boxes.create("src", None, None, None)
    with pytest.raises(InvalidState, match="engine commits"):
        await world.services.portable.export("src", None)


async def test_a_member_exports_only_their_own(copying: World) -> None:
    w = copying
    await w.boxes.create("owners", None, None, None)
    member = await join(w, "bob")
    with pytest.raises(NotFound):
        await w.services.portable.export("owners", None, member)


async def test_imports_beyond_a_few_at_once_are_refused_not_queued(copying: World) -> None:
    # Each holds a worker thread while its client sends; slow clients must not take them all.
    import anyio

    w = copying
    await w.boxes.create("src", None, None, None)
    pieces = await _export(w, "src")
    release = anyio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield pieces[0]
        await release.wait()
        for piece in pieces[1:]:
            yield piece

    async with anyio.create_task_group() as tg:
        for i in range(IMPORTS_AT_ONCE):
            tg.start_soon(w.services.portable.import_box, slow(), f"c{i}", None, False)
        await anyio.sleep(0.2)
        with pytest.raises(CapacityExceeded, match="try again"):
            await w.services.portable.import_box(Body(pieces).__aiter__(), "late", None, False)
        release.set()
    assert {b.name for b in await w.repo.all()} >= {f"c{i}" for i in range(IMPORTS_AT_ONCE)}
