"""Downloads through the API on fakes (routes/files.py, services/files.py): a file's bytes
as they are, a folder as a safe archive, named for the browser and never rendered."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi.testclient import TestClient

from paddockd.api.app import create_app
from paddockd.runtime.base import FileInfo

from ..conftest import World


@pytest.fixture
def api(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.services)) as client:
        client.headers["Authorization"] = f"Bearer {world.token}"
        yield client


@pytest.fixture
def box(api: TestClient) -> str:
    assert api.post("/v1/boxes", json={"name": "b"}).status_code == 201
    return "b"


def test_a_file_downloads_as_it_is(api: TestClient, box: str, world: World) -> None:
    cid = next(iter(world.runtime.by_id))
    world.runtime.fs(cid).write('/config/naïve "x".txt', (1000, 1000), b"hello from the box\n")
    got = api.get(f"/v1/boxes/{box}/files/download", params={"path": '/config/naïve "x".txt'})
    assert got.status_code == 200 and got.content == b"hello from the box\n"
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["x-content-type-options"] == "nosniff"
    # The name comes from the box: quoted, never able to end the header's value.
    assert got.headers["content-disposition"] == (
        "attachment; filename=\"na_ve _x_.txt\"; filename*=UTF-8''na%C3%AFve%20%22x%22.txt"
    )


def test_a_folder_downloads_as_a_safe_zip(
    api: TestClient, box: str, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, link in [
            ("proj", tarfile.DIRTYPE, ""),
            ("proj/etc", tarfile.SYMTYPE, "/etc"),
        ]:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            tar.addfile(info)
        info = tarfile.TarInfo("proj/f")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))

    async def get_archive(cid: str, path: str) -> tuple[AsyncIterator[bytes], FileInfo]:
        async def chunks() -> AsyncIterator[bytes]:
            data = buf.getvalue()
            for i in range(0, len(data), 700):  # in odd pieces, as a socket gives them
                yield data[i : i + 700]

        return chunks(), FileInfo("/config/proj", "dir", 4096, 0o755, 1.0, 1000, 1000)

    monkeypatch.setattr(world.runtime, "get_archive", get_archive)
    got = api.get(f"/v1/boxes/{box}/files/download", params={"path": "proj"})
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    assert 'filename="proj.zip"' in got.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(got.content)) as zf:
        assert zf.namelist() == ["proj/", "proj/f"] and zf.read("proj/f") == b"abc"
    tar_got = api.get(f"/v1/boxes/{box}/files/download", params={"path": "proj", "format": "tar"})
    with tarfile.open(fileobj=io.BytesIO(tar_got.content)) as tar:
        assert tar.getnames() == ["proj", "proj/f"]
    bad = api.get(f"/v1/boxes/{box}/files/download", params={"path": "proj", "format": "rar"})
    assert bad.status_code == 422 or bad.json()["error"]["code"] == "invalid_request"
