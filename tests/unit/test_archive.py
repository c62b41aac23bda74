"""Push builds faithful tar streams; pull never writes outside its destination."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock._archive import extract_stream, plan_push, pull_target, tar_stream
from paddock._exceptions import Conflict, InvalidRequest, NotFound


def chunks(data: bytes, size: int = 7000) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def evil_tar(*members: tuple[str, str, str]) -> bytes:
    """members: (name, kind, payload-or-linkname) with kind in file|dir|sym|hard."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = extra.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = extra
            tar.addfile(info)
    return buf.getvalue()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub" / "empty").mkdir(parents=True)
    (src / "bin.dat").write_bytes(bytes(range(256)) * 1000)
    (src / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (src / "run.sh").chmod(0o755)
    (src / "sub" / "x.txt").write_text("x")
    os.symlink("sub/x.txt", src / "link")
    (src / "node_modules").mkdir()
    (src / "node_modules" / "big.js").write_text("skip me")
    (src / "secret.env").write_text("TOKEN=1")
    (src / ".paddockignore").write_text("node_modules/\n*.env\n")
    return src


def test_push_then_extract_round_trip_keeps_modes_links_and_empty_dirs(
    tree: Path, tmp_path: Path
) -> None:
    plan = plan_push([tree], [], into_dir=False)
    names = {e.arcname for e in plan.entries}
    assert "node_modules" not in names and "secret.env" not in names  # .paddockignore
    data = b"".join(tar_stream(plan))
    out = tmp_path / "out"
    extract_stream(chunks(b"".join(_rooted(data, "proj"))), "proj", out)
    assert (out / "bin.dat").read_bytes() == (tree / "bin.dat").read_bytes()
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o755
    assert os.readlink(out / "link") == "sub/x.txt"
    assert (out / "sub" / "empty").is_dir()


def _rooted(data: bytes, root: str) -> Iterator[bytes]:
    """Re-root a push archive under one directory, as the engine returns a pull."""
    src = tarfile.open(fileobj=io.BytesIO(data))  # noqa: SIM115 - read within this function
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as dst:
        top = tarfile.TarInfo(root)
        top.type = tarfile.DIRTYPE
        top.mode = 0o755
        dst.addfile(top)
        for m in src.getmembers():
            f = src.extractfile(m) if m.isreg() else None
            m.name = f"{root}/{m.name}"
            dst.addfile(m, f)
    yield buf.getvalue()


def test_exclude_patterns(tree: Path) -> None:
    plan = plan_push([tree], ["*.dat", "sub/"], into_dir=False)
    names = {e.arcname for e in plan.entries}
    assert "bin.dat" not in names and not any(n.startswith("sub") for n in names)
    assert "run.sh" in names


def test_push_missing_path(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        plan_push([tmp_path / "nope"], [], into_dir=False)


def test_tar_stream_is_lazy_for_large_files(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(5 * 1024 * 1024))
    sizes = [len(p) for p in tar_stream(plan_push([big], [], into_dir=True))]
    assert len(sizes) >= 4 and max(sizes) < 2 * 1024 * 1024


@pytest.mark.parametrize(
    "members",
    [
        [("root", "dir", ""), ("/etc/passwd", "file", "x")],
        [("root", "dir", ""), ("root/../../escape", "file", "x")],
        [("root", "dir", ""), ("root/up", "sym", "../../..")],
        [("root", "dir", ""), ("root/abs", "sym", "/etc")],
        [("root", "dir", ""), ("root/h", "hard", "/etc/passwd")],
        [("root", "dir", ""), ("other/x", "file", "x")],
        [("root", "sym", "/etc")],
    ],
)
def test_pull_refuses_escapes(members: list[tuple[str, str, str]], tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InvalidRequest):
        extract_stream(chunks(evil_tar(*members)), "root", dest / "root")
    assert not (tmp_path / "escape").exists()


def test_pull_never_writes_through_a_symlink_left_by_an_earlier_pull(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    (dest / "root").mkdir(parents=True)
    os.symlink(outside, dest / "root" / "link")  # planted earlier
    tar = evil_tar(("root", "dir", ""), ("root/link/pwned", "file", "x"))
    with pytest.raises(InvalidRequest, match="symlink"):
        extract_stream(chunks(tar), "root", dest / "root", force=True)
    assert list(outside.iterdir()) == []


def test_pull_refuses_link_then_write_through_it_in_one_archive(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tar = evil_tar(("root", "dir", ""), ("root/d", "sym", "."), ("root/d/f", "file", "x"))
    with pytest.raises(InvalidRequest, match="symlink"):
        extract_stream(chunks(tar), "root", tmp_path / "root")


def test_pull_into_existing_file_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("mine")
    tar = evil_tar(("f.txt", "file", "theirs"))
    with pytest.raises(Conflict, match="--force"):
        extract_stream(chunks(tar), "f.txt", target)
    assert target.read_text() == "mine"
    extract_stream(chunks(tar), "f.txt", target, force=True)
    assert target.read_text() == "theirs"


def test_pull_target_like_cp(tmp_path: Path) -> None:
    assert pull_target(tmp_path, "x") == tmp_path / "x"
    assert pull_target(tmp_path / "new", "x") == tmp_path / "new"


def test_setuid_bits_are_dropped(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("s")
        info.mode = 0o4755
        tar.addfile(info, io.BytesIO(b""))
    extract_stream(chunks(buf.getvalue()), "s", tmp_path / "s")
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o755
