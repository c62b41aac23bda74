"""A backup file is read as untrusted (paddockd/backup.py `_unpack`): only its own kind of
members, nothing outside its folder, every file matching the manifest's checksum, and a
newer schema or another format refused."""

from __future__ import annotations

import hashlib
import io
import json
import os
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


@pytest.mark.parametrize(
    "drive",
    [
        {"volume": "paddock-drive-other", "labels": {"paddock.drive": "data"}},
        {"volume": "paddock-drive-data", "labels": {"paddock.drive": "../x"}},
        {"volume": "paddock-drive-data", "labels": {"paddock.drive": "data"}, "x": 1},
        {"volume": "paddock-drive-data", "labels": {"paddock.drive": 1}},
        {
            "volume": "paddock-drive-data",
            "labels": {"paddock.drive": "data", "paddock.drive.capacity_mb": "-5"},
        },
        {
            "volume": "paddock-user-../x-drive-data",
            "labels": {"paddock.drive": "data", "paddock.owner": "../x"},
        },
        "paddock-drive-data",
    ],
)
def test_a_drive_the_manifest_misnames_is_refused(tmp_path: Path, drive: object) -> None:
    files = {"paddock.db": b"db", "drives/paddock-drive-data.tar": b"t"}
    source = _tar({"manifest.json": _manifest(files, drives=[drive]), **files})
    with pytest.raises(InvalidRequest, match="drives are of the wrong shape"):
        _unpack(source, tmp_path)


def test_a_drives_files_come_back_as_they_were_and_nothing_lands_outside(
    tmp_path: Path,
) -> None:
    from paddockd.backup import _load_folder, _save_folder

    drive = tmp_path / "drive"
    (drive / "sub").mkdir(parents=True)
    (drive / "sub" / "f.txt").write_text("kept")
    (drive / "run").write_text("#!/bin/sh\n")
    (drive / "run").chmod(0o4755)  # setuid: not brought back
    (drive / "up").symlink_to("sub/f.txt")
    (drive / "python").symlink_to("/usr/bin/python3")  # a venv's: kept as a link
    (drive / "escape").symlink_to("/etc")  # a box's link to the host: never followed
    os.mkfifo(drive / "pipe")
    os.link(drive / "sub" / "f.txt", drive / "hard")
    os.chown(drive / "sub" / "f.txt", 101000, 101000)
    saved = tmp_path / "drive.tar"
    _save_folder(drive, saved, 1 << 20)
    with tarfile.open(saved) as tar:
        names = tar.getnames()
    assert not any(n.startswith("./escape/") for n in names)  # /etc was not walked
    back = tmp_path / "back"
    back.mkdir()
    _load_folder(saved, back)
    assert (back / "sub" / "f.txt").read_text() == "kept"
    assert os.readlink(back / "up") == "sub/f.txt"
    assert os.readlink(back / "python") == "/usr/bin/python3"
    assert os.readlink(back / "escape") == "/etc"
    assert (back / "pipe").is_fifo()
    assert (back / "hard").stat().st_ino == (back / "sub" / "f.txt").stat().st_ino
    assert (back / "sub" / "f.txt").stat().st_uid == 101000  # owners by number
    assert (back / "run").stat().st_mode & 0o7777 == 0o755


def _evil(path: Path, entries: list[tarfile.TarInfo]) -> None:
    with tarfile.open(path, "w") as tar:
        for info in entries:
            data = b"pwned" if info.isreg() else None
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "entries",
    [
        [_entry("out", tarfile.SYMTYPE, "OUTSIDE"), _entry("out/x")],
        [_entry("../up.txt")],
        [_entry("/abs.txt")],
        [_entry("d", tarfile.DIRTYPE), _entry("d/../../up.txt")],
        [_entry("h", tarfile.LNKTYPE, "../outside/secret")],
        [_entry("out", tarfile.SYMTYPE, "OUTSIDE"), _entry("h", tarfile.LNKTYPE, "out/secret")],
        [_entry("dev", tarfile.CHRTYPE)],
        [_entry("same"), _entry("same", tarfile.SYMTYPE, "OUTSIDE/secret")],
        [_entry("l", tarfile.SYMTYPE, "OUTSIDE/secret"), _entry("l")],
    ],
)
def test_a_tampered_drive_writes_nothing_outside_the_drive(
    tmp_path: Path, entries: list[tarfile.TarInfo]
) -> None:
    from paddockd.backup import _load_folder

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host's")
    for info in entries:
        info.linkname = info.linkname.replace("OUTSIDE", str(outside))
    evil = tmp_path / "evil.tar"
    _evil(evil, entries)
    victim = tmp_path / "drive" / "inner"
    victim.mkdir(parents=True)
    with pytest.raises(InvalidRequest, match="refused"):
        _load_folder(evil, victim)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "host's"
    assert (outside / "secret").stat().st_nlink == 1
    assert not (tmp_path / "up.txt").exists() and not (tmp_path / "drive" / "up.txt").exists()


def test_a_drive_a_box_made_hostile_costs_a_bounded_copy(tmp_path: Path) -> None:
    """Sparse files claiming terabytes stop the drive's copy at its budget; folders
    nested past any depth are cut off; neither fails or hangs."""
    from paddockd import drive_archive

    drive = tmp_path / "drive"
    deep = drive.joinpath(*["d"] * (drive_archive.MAX_DEPTH + 50))
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("x")
    with (tmp_path / "deep.tar").open("wb") as out:
        count = drive_archive.write(str(drive), out, 1 << 20)
    assert drive_archive.MAX_DEPTH <= count <= drive_archive.MAX_DEPTH + 2
    with open(drive / "sparse", "wb") as f:
        f.truncate(1 << 40)  # a terabyte of nothing
    with pytest.raises(drive_archive.TooBig), (tmp_path / "sparse.tar").open("wb") as out:
        drive_archive.write(str(drive), out, 64 << 20)
    assert (tmp_path / "sparse.tar").stat().st_size < 1 << 20
