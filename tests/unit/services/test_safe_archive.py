"""Folder downloads (services/safe_archive.py): what a box's archive becomes for a browser
keeps files, folders and links that stay inside the folder, in a zip or a tar, and leaves
out every member that could lead outside it when unpacked."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile

import pytest

from paddockd.services.safe_archive import Tally, first_file, link_stays_inside, rewrite


def box_tar(*members: tuple[str, str, str | bytes]) -> bytes:
    """A tar as the engine sends one: (name, kind, data or link target) in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "file":
                data = value if isinstance(value, bytes) else value.encode()
                info.size, info.mode = len(data), 0o4755  # setuid: must not survive
                tar.addfile(info, io.BytesIO(data))
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = str(value)
                tar.addfile(info)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
    return buf.getvalue()


HOSTILE = box_tar(
    ("proj", "dir", ""),
    ("proj/a.txt", "file", "alpha"),
    ("proj/sub", "dir", ""),
    ("proj/sub/b.bin", "file", bytes(range(256)) * 5000),
    ("proj/sub/up", "sym", "../a.txt"),  # inside: kept
    ("proj/sub/here", "sym", "b.bin"),  # inside: kept
    ("proj/passwd", "sym", "/etc/passwd"),  # absolute: out
    ("proj/out", "sym", "../../x"),  # above the folder: out
    ("proj/sneaky", "sym", "sub/../.."),  # climbs after descending: out
    ("proj/sub/dots", "sym", ".."),  # the folder itself: kept
    ("proj/twin", "hard", "proj/a.txt"),  # a hard link to a kept file
    ("proj/stray", "hard", "etc/shadow"),  # a hard link to nothing kept: out
    ("proj/pipe", "fifo", ""),  # out
    ("proj/../evil", "file", "x"),  # out
    ("other/x", "file", "x"),  # not under the top folder: out
    ("proj/win\\..\\..\\evil", "file", "x"),  # `..` for unpackers that split on `\`: out
)
LEFT_OUT = [
    "proj/passwd",
    "proj/out",
    "proj/sneaky",
    "proj/stray",
    "proj/pipe",
    "proj/../evil",
    "other/x",
    "proj/win\\..\\..\\evil",
]


def made(fmt: str, data: bytes = HOSTILE) -> tuple[bytes, Tally]:
    tally = Tally()
    out = b"".join(rewrite(io.BytesIO(data), fmt, tally))  # type: ignore[arg-type]
    return out, tally


def test_a_zip_keeps_what_stays_inside_and_leaves_out_the_rest() -> None:
    out, tally = made("zip")
    with zipfile.ZipFile(io.BytesIO(out)) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        assert names == [
            "proj/",
            "proj/a.txt",
            "proj/sub/",
            "proj/sub/b.bin",
            "proj/sub/up",
            "proj/sub/here",
            "proj/sub/dots",
        ]
        assert zf.read("proj/sub/b.bin") == bytes(range(256)) * 5000
        link = zf.getinfo("proj/sub/up")
        assert stat.S_ISLNK(link.external_attr >> 16) and zf.read(link) == b"../a.txt"
        assert (zf.getinfo("proj/a.txt").external_attr >> 16) & 0o7777 == 0o755
    # In a zip a hard link has nowhere to point (its data went by in the stream).
    assert tally.left_out == [*LEFT_OUT[:3], "proj/twin", *LEFT_OUT[3:]]


def test_a_tar_keeps_hard_links_to_kept_files() -> None:
    out, tally = made("tar")
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {
            "proj",
            "proj/a.txt",
            "proj/sub",
            "proj/sub/b.bin",
            "proj/sub/up",
            "proj/sub/here",
            "proj/sub/dots",
            "proj/twin",
        }
        assert members["proj/twin"].islnk() and members["proj/twin"].linkname == "proj/a.txt"
        assert members["proj/a.txt"].mode == 0o755
        data = tar.extractfile("proj/sub/b.bin")
        assert data is not None and data.read() == bytes(range(256)) * 5000
    assert tally.left_out == LEFT_OUT


@pytest.mark.parametrize(
    ("at", "target", "inside"),
    [
        (["p", "l"], "x", True),
        (["p", "l"], "./x/y", True),
        (["p", "l"], "..", False),
        (["p", "d", "l"], "..", True),
        (["p", "d", "l"], "../..", False),
        (["p", "d", "l"], "x/../y", False),
        (["p", "l"], "/abs", False),
        (["p", "l"], "", False),
    ],
)
def test_link_rule(at: list[str], target: str, inside: bool) -> None:
    assert link_stays_inside(at, target) is inside


def test_first_file_is_a_files_data() -> None:
    data = box_tar(("f.txt", "file", "contents"))
    assert b"".join(first_file(io.BytesIO(data))) == b"contents"  # type: ignore[arg-type]
    with pytest.raises(tarfile.ReadError):
        list(first_file(io.BytesIO(box_tar(("d", "dir", "")))))  # type: ignore[arg-type]
