"""A backup file is read as untrusted (paddockd/backup.py `_unpack`): only its own kind of
members, nothing outside its folder, every file matching the manifest's checksum, and a
newer schema or another format refused."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from paddockd.backup import FORMAT, _unpack
from paddockd.domain.errors import InvalidRequest
from paddockd.store.db import MIGRATIONS


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    out.seek(0)
    return out


def _manifest(members: dict[str, bytes], **changes: object) -> bytes:
    data = {
        "paddock": "0.1.0",
        "schema": MIGRATIONS[-1][0],
        "created_at": 0.0,
        "host": "h",
        "uid_base": 0,
        "with_snapshots": False,
        "files": {n: hashlib.sha256(d).hexdigest() for n, d in members.items()},
        "format": FORMAT,
        **changes,
    }
    return json.dumps(data).encode()


def test_a_whole_backup_unpacks(tmp_path: Path) -> None:
    files = {"paddock.db": b"db", "keys/preview.key": b"k"}
    got = _unpack(_tar({"manifest.json": _manifest(files), **files}), tmp_path)
    assert (tmp_path / "keys" / "preview.key").read_bytes() == b"k"
    assert got.files.keys() == files.keys()


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ({"../escape": b"x"}, "holds"),
        ({"/etc/passwd": b"x"}, "holds"),
        ({"other/file": b"x"}, "holds"),
        ({"keys/boxes/evil": b"x"}, "holds"),
        ({"keys/authorized_keys": b"x"}, "holds"),
        ({"disks/a/b/c.paddock": b"x"}, "holds"),
        ({"paddock.db": b"db"}, "manifest"),
    ],
)
def test_foreign_members_are_refused(tmp_path: Path, members: dict[str, bytes], says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        _unpack(_tar(members), tmp_path / "work")
    assert not (tmp_path / "escape").exists()


def test_a_link_is_refused(tmp_path: Path) -> None:
    files = {"paddock.db": b"db"}
    source = _tar({"manifest.json": _manifest(files), **files}, {"keys/x": "/etc/shadow"})
    with pytest.raises(InvalidRequest, match="holds"):
        _unpack(source, tmp_path)


def test_changed_missing_or_newer_is_refused(tmp_path: Path) -> None:
    files = {"paddock.db": b"db"}
    changed = _tar({"manifest.json": _manifest(files), "paddock.db": b"dB"})
    with pytest.raises(InvalidRequest, match="changed or damaged"):
        _unpack(changed, tmp_path / "a")
    missing = _tar({"manifest.json": _manifest({**files, "keys/envd.key": b"k"}), **files})
    with pytest.raises(InvalidRequest, match="cut short"):
        _unpack(missing, tmp_path / "b")
    newer = _tar({"manifest.json": _manifest(files, schema=10_000), **files})
    with pytest.raises(InvalidRequest, match="newer Paddock"):
        _unpack(newer, tmp_path / "c")
    odd = _tar({"manifest.json": _manifest(files, files=["x"]), **files})
    with pytest.raises(InvalidRequest, match="wrong shape"):
        _unpack(odd, tmp_path / "d")
    with pytest.raises(InvalidRequest, match="damaged"):
        _unpack(io.BytesIO(b"not a tar at all" * 100), tmp_path / "e")
