"""Push builds faithful tar streams; pull never writes outside its destination."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import _archive
from paddock._archive import extract_stream, plan_push, tar_stream
from paddock.wire.errors import Conflict, InvalidRequest, NotFound, PaddockError

from ..contained import assert_contained, snapshot


def chunks(data: bytes, size: int = 7000) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


_TYPES = {
    "dir": tarfile.DIRTYPE,
    "sym": tarfile.SYMTYPE,
    "hard": tarfile.LNKTYPE,
    "chr": tarfile.CHRTYPE,
    "blk": tarfile.BLKTYPE,
    "fifo": tarfile.FIFOTYPE,
}


def evil_tar(*members: tuple[str, str, str]) -> bytes:
    """members: (name, kind, payload-or-linkname), kind: file|dir|sym|hard|chr|blk|fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = extra.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = _TYPES[kind]
            info.linkname = extra
            info.devmajor, info.devminor = (1, 3) if kind in ("chr", "blk") else (0, 0)
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
    plan = plan_push([(str(tree), "")], [])
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
    plan = plan_push([(str(tree), "")], ["*.dat", "sub/"])
    names = {e.arcname for e in plan.entries}
    assert "bin.dat" not in names and not any(n.startswith("sub") for n in names)
    assert "run.sh" in names


IGNORE_CASES = json.loads((Path(__file__).parents[2] / "spec" / "ignore_cases.json").read_text())[
    "cases"
]


@pytest.mark.parametrize("case", IGNORE_CASES, ids=lambda c: f"{c['patterns']}-{c['path']}")
def test_ignore_patterns_match_the_table_both_sdks_share(case: dict, tmp_path: Path) -> None:
    # The TypeScript SDK's hand-written matcher runs the same table (ignore.test.ts).
    path = tmp_path / "src" / case["path"]
    if case["path"].endswith("/"):
        path.mkdir(parents=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    plan = plan_push([(str(tmp_path / "src"), "")], case["patterns"])
    names = {e.arcname for e in plan.entries}
    assert (case["path"].rstrip("/") not in names) is case["excluded"]


def test_push_missing_path(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        plan_push([(str(tmp_path / "nope"), "")], [])


def test_tar_stream_is_lazy_for_large_files(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(5 * 1024 * 1024))
    sizes = [len(p) for p in tar_stream(plan_push([(str(big), "")], []))]
    assert len(sizes) >= 4 and max(sizes) < 2 * 1024 * 1024


@pytest.mark.parametrize(
    "members",
    [
        [("root", "dir", ""), ("/etc/passwd", "file", "x")],
        [("root", "dir", ""), ("root/../../escape", "file", "x")],
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
    with pytest.raises(Conflict, match="--force"):
        extract_stream(chunks(tar), "root", dest / "root", merge=True)
    # With --force the link is replaced by the pulled folder, never written through.
    extract_stream(chunks(tar), "root", dest / "root", force=True)
    assert list(outside.iterdir()) == []
    assert not (dest / "root/link").is_symlink() and (dest / "root/link/pwned").is_file()


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


def test_push_names_each_source_as_told(tree: Path) -> None:
    plan = plan_push([(str(tree), "site"), (str(tree / "run.sh"), "go.sh")], [])
    names = [e.arcname for e in plan.entries]
    assert names[0] == "site" and "site/sub/x.txt" in names and names[-1] == "go.sh"
    # A file given no name keeps its own.
    assert [e.arcname for e in plan_push([(str(tree / "run.sh"), "")], []).entries] == ["run.sh"]


def test_merge_puts_the_contents_into_an_existing_folder(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir(mode=0o750)
    (dest / "mine.txt").write_text("mine")
    tar = evil_tar(("dist", "dir", ""), ("dist/a.txt", "file", "a"), ("dist/sub", "dir", ""))
    with pytest.raises(Conflict):  # without merge, an existing target is refused whole
        extract_stream(chunks(tar), "dist", dest)
    extract_stream(chunks(tar), "dist", dest, merge=True)
    assert (dest / "a.txt").read_text() == "a" and (dest / "sub").is_dir()
    assert (dest / "mine.txt").read_text() == "mine"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o750  # the user's folder keeps its mode


def test_merge_stops_at_a_file_already_there_unless_force(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "a.txt").write_text("mine")
    tar = evil_tar(("dist", "dir", ""), ("dist/a.txt", "file", "theirs"))
    with pytest.raises(Conflict, match="--force"):
        extract_stream(chunks(tar), "dist", dest, merge=True)
    assert (dest / "a.txt").read_text() == "mine"
    extract_stream(chunks(tar), "dist", dest, merge=True, force=True)
    assert (dest / "a.txt").read_text() == "theirs"


@pytest.mark.parametrize(
    ("parent", "error", "message"),
    [("missing/dir", NotFound, "no such folder"), ("file.txt", InvalidRequest, "is not a folder")],
)
def test_a_destination_that_cannot_be_written_is_one_clear_error(
    tmp_path: Path, parent: str, error: type[PaddockError], message: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(error, match=message):
        extract_stream(chunks(evil_tar(("f", "file", "x"))), "f", tmp_path / parent / "f")


def test_an_unwritable_destination_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_archive.os, "open", denied)  # as for a user without write access
    with pytest.raises(PaddockError, match=r"cannot write in .*: Permission denied"):
        extract_stream(chunks(evil_tar(("f", "file", "x"))), "f", tmp_path / "f")


def test_setuid_bits_are_dropped(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("s")
        info.mode = 0o4755
        tar.addfile(info, io.BytesIO(b""))
    extract_stream(chunks(buf.getvalue()), "s", tmp_path / "s")
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o755


# -- a hostile box's tar: nothing lands or points outside DEST --------------------------


@pytest.fixture(params=["at-calls", "paths"])
def platform(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of walking the destination: folder fds (POSIX) and checked paths (the
    fallback for platforms without the *at calls, i.e. Windows)."""
    monkeypatch.setattr(_archive, "_AT", request.param == "at-calls")
    return str(request.param)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """What the attacks aim at: a folder beside DEST with a sentinel; it must not change."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "sentinel").write_text("untouched")
    before = snapshot(tmp_path, skip="dest")
    yield target
    assert snapshot(tmp_path, skip="dest") == before


def pull(tmp_path: Path, *members: tuple[str, str, str], force: bool = False) -> Path:
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    extract_stream(chunks(evil_tar(*members)), "root", dest / "root", force=force)
    return dest


def chain(depth: int) -> list[tuple[str, str, str]]:
    """The review's chain: b1 -> .., b2 -> b1/.., … each one folder higher than the last,
    every one inside DEST by a lexical check; `host` then aims at the sentinel beside DEST."""
    deep = "root/" + "/".join(f"d{i}" for i in range(depth))
    members = [("root", "dir", "")]
    members += [
        ("root/" + "/".join(f"d{i}" for i in range(n + 1)), "dir", "") for n in range(depth)
    ]
    members.append((f"{deep}/b1", "sym", ".."))
    members += [(f"{deep}/b{n}", "sym", f"b{n - 1}/..") for n in range(2, depth + 3)]
    members.append((f"{deep}/host", "sym", f"b{depth + 2}/outside/sentinel"))
    return members


def test_pull_keeps_the_symlink_chain_as_links(
    platform: str, outside: Path, tmp_path: Path
) -> None:
    # Links are kept as the box has them (as docker cp does); what matters is that the
    # pull writes nothing through them, and `outside` checks that nothing changed there.
    dest = pull(tmp_path, *chain(5))
    host = dest / "root/d0/d1/d2/d3/d4/host"
    assert host.is_symlink() and os.readlink(host) == "b7/outside/sentinel"


def test_pull_keeps_a_chain_that_stays_inside(platform: str, tmp_path: Path) -> None:
    # The same chain stopped at b5 ends at the root of DEST: allowed.
    members = chain(5)[:-3]
    dest = pull(tmp_path, *members, ("root/d0/d1/d2/d3/d4/top", "sym", "b5"))
    assert os.path.realpath(dest / "root/d0/d1/d2/d3/d4/top") == str((dest / "root").resolve())


def test_a_projects_outward_links_are_kept_as_links(
    platform: str, outside: Path, tmp_path: Path
) -> None:
    # A virtualenv and node_modules/.bin, as a real project has them.
    dest = pull(
        tmp_path,
        ("root", "dir", ""),
        ("root/.venv", "dir", ""),
        ("root/.venv/bin", "dir", ""),
        ("root/.venv/bin/python3", "sym", "/usr/bin/python3"),
        ("root/.venv/bin/python", "sym", "python3"),
        ("root/node_modules", "dir", ""),
        ("root/node_modules/.bin", "dir", ""),
        ("root/node_modules/.bin/mocha", "sym", "../mocha/bin/mocha.js"),
        ("root/up", "sym", "../../outside"),
        ("root/loop1", "sym", "loop2"),
        ("root/loop2", "sym", "loop1"),
    )
    assert os.readlink(dest / "root/.venv/bin/python3") == "/usr/bin/python3"
    assert os.readlink(dest / "root/.venv/bin/python") == "python3"
    assert os.readlink(dest / "root/node_modules/.bin/mocha") == "../mocha/bin/mocha.js"
    assert os.readlink(dest / "root/up") == "../../outside"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "outside"]  # nothing aside


@pytest.mark.parametrize("existing", [False, True])
def test_a_refused_pull_leaves_the_destination_as_it_was(
    platform: str, outside: Path, tmp_path: Path, existing: bool
) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    if existing:
        (dest / "root").mkdir()
        (dest / "root/mine.txt").write_text("mine")
    before = snapshot(dest, skip="\0")
    members = [("root", "dir", ""), ("root/a", "dir", ""), ("root/a/f", "file", "x")]
    with pytest.raises(InvalidRequest, match="a fifo"):
        pull(tmp_path, *members, ("root/pipe", "fifo", ""), force=True)
    assert snapshot(dest, skip="\0") == before
    assert sorted(p.name for p in dest.iterdir()) == (["root"] if existing else [])


def test_a_merge_checks_every_conflict_before_it_moves_anything(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    (dest / "sub").mkdir(parents=True)
    (dest / "sub/z.txt").write_text("mine")
    members = [("dist", "dir", ""), ("dist/a.txt", "file", "a"), ("dist/sub", "dir", "")]
    tar = evil_tar(*members, ("dist/sub/z.txt", "file", "theirs"))
    with pytest.raises(Conflict, match=r"z\.txt already exists"):
        extract_stream(chunks(tar), "dist", dest, merge=True)
    assert sorted(p.name for p in dest.iterdir()) == ["sub"]  # a.txt did not move in first


def test_pull_exclude_leaves_out_what_matches(platform: str, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    tar = evil_tar(
        ("root", "dir", ""),
        ("root/.venv", "dir", ""),
        ("root/.venv/bin", "dir", ""),
        ("root/.venv/bin/python3", "sym", "/usr/bin/python3"),
        ("root/src", "dir", ""),
        ("root/src/app.py", "file", "print()"),
        ("root/src/app.pyc", "file", "junk"),
    )
    extract_stream(chunks(tar), "root", dest / "root", exclude=[".venv/", "*.pyc"])
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "root",
        "root/src",
        "root/src/app.py",
    ]


@pytest.mark.parametrize(
    "members",
    [
        [("root", "dir", ""), ("root/h", "hard", "/etc/passwd")],
        [("root", "dir", ""), ("root/h", "hard", "root/../outside/sentinel")],
        [("root", "dir", ""), ("root/h", "hard", "other/sentinel")],
        [("root", "dir", ""), ("root/h", "hard", "root/never-written")],
        [("root", "dir", ""), ("root/s", "sym", "f"), ("root/h", "hard", "root/s")],
        [("root", "dir", ""), ("root/null", "chr", "")],
        [("root", "dir", ""), ("root/sda", "blk", "")],
        [("root", "dir", ""), ("root/pipe", "fifo", "")],
        [("root", "dir", ""), ("root/../outside/sentinel", "file", "pwned")],
        [("root", "dir", ""), ("/outside/sentinel", "file", "pwned")],
    ],
)
def test_pull_refuses_hostile_members(
    platform: str, outside: Path, tmp_path: Path, members: list[tuple[str, str, str]]
) -> None:
    with pytest.raises(InvalidRequest, match=r"^refusing"):
        pull(tmp_path, *members)
    dest = tmp_path / "dest"
    assert_contained(dest)
    assert list(dest.iterdir()) == []  # what came before the refusal went with it


def test_pull_never_writes_through_a_symlink_it_just_made(
    platform: str, outside: Path, tmp_path: Path
) -> None:
    # d -> . is harmless on its own; writing root/d/f would follow it.
    members = [("root", "dir", ""), ("root/d", "sym", "."), ("root/d/f", "file", "x")]
    with pytest.raises(InvalidRequest, match="goes through the symlink"):
        pull(tmp_path, *members)
    assert not (tmp_path / "dest/root/f").exists()


def test_pull_never_writes_through_a_symlink_that_points_out(
    platform: str, outside: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "dest"
    (dest / "root").mkdir(parents=True)
    os.symlink(outside, dest / "root" / "out")  # planted before this pull (by the user)
    for name in ("root/out/sentinel", "root/out/new"):
        pull(tmp_path, ("root", "dir", ""), (name, "file", "pwned"), force=True)
        assert not (dest / "root/out").is_symlink()  # replaced by the folder, not entered
        shutil.rmtree(dest / "root/out")
        os.symlink(outside, dest / "root" / "out")


@pytest.mark.parametrize("second", [("root/f", "sym", "g"), ("root/f", "file", "y")])
def test_a_name_the_box_sends_twice_is_refused(
    platform: str, outside: Path, tmp_path: Path, second: tuple[str, str, str]
) -> None:
    members = [("root", "dir", ""), ("root/f", "file", "x")]
    for force in (False, True):
        with pytest.raises(Conflict, match="twice"):
            pull(tmp_path, *members, second, force=force)
    assert list((tmp_path / "dest").iterdir()) == []


def test_a_folder_never_becomes_a_link(platform: str, outside: Path, tmp_path: Path) -> None:
    members = [("root", "dir", ""), ("root/d", "dir", ""), ("root/d", "sym", "e")]
    with pytest.raises(Conflict, match="twice"):
        pull(tmp_path, *members, force=True)


def test_hard_links_to_files_of_the_pull_are_kept(platform: str, tmp_path: Path) -> None:
    dest = pull(
        tmp_path, ("root", "dir", ""), ("root/f", "file", "data"), ("root/h", "hard", "root/f")
    )
    assert (dest / "root/h").read_text() == "data"
    assert (dest / "root/h").stat().st_ino == (dest / "root/f").stat().st_ino


def test_long_names(platform: str, outside: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="longer than 255 bytes"):
        pull(tmp_path, ("root", "dir", ""), ("root/" + "n" * 256, "file", "x"))
    deep = "root/" + "/".join(["d"] * 300) + "/f"
    with pytest.raises(InvalidRequest, match="deeper than"):
        pull(tmp_path, ("root", "dir", ""), (deep, "file", "x"), force=True)
    assert_contained(tmp_path / "dest")


def test_a_path_longer_than_path_max_is_written_through_folder_fds(tmp_path: Path) -> None:
    if not _archive._AT:
        pytest.skip("needs the *at calls")
    names = ["n" * 200 + str(i) for i in range(25)]  # ~5 kB: more than PATH_MAX
    members = [("root", "dir", "")]
    members += [("root/" + "/".join(names[: i + 1]), "dir", "") for i in range(len(names))]
    members.append(("root/" + "/".join(names) + "/f", "file", "deep"))
    dest = pull(tmp_path, *members)
    fd = os.open(dest / "root", os.O_RDONLY)
    try:
        for name in names:
            fd, old = os.open(name, os.O_RDONLY, dir_fd=fd), fd
            os.close(old)
        assert os.stat("f", dir_fd=fd).st_size == 4
    finally:
        os.close(fd)


def test_a_broken_archive_is_one_clear_error(tmp_path: Path) -> None:
    data = evil_tar(("root", "dir", ""), ("root/f", "file", "x" * 5000))
    with pytest.raises(InvalidRequest, match="broken archive"):
        extract_stream(chunks(data[:1200]), "root", tmp_path / "root")


@pytest.mark.parametrize(
    ("name", "kind", "size", "link"),
    [
        ("a.txt", tarfile.REGTYPE, 10, ""),
        ("src", tarfile.DIRTYPE, 0, ""),
        ("l", tarfile.SYMTYPE, 0, "../target/x"),
        ("x" * 100, tarfile.REGTYPE, 1, ""),
        ("d" * 99, tarfile.DIRTYPE, 0, ""),  # 100 with its slash
        ("f", tarfile.FIFOTYPE, 0, ""),
        ("big", tarfile.REGTYPE, 8**11 - 1, ""),
        # These need pax records: tarfile writes them.
        ("a/" * 60 + "f", tarfile.REGTYPE, 5, ""),
        ("é.txt", tarfile.REGTYPE, 5, ""),
        ("huge", tarfile.REGTYPE, 8**11, ""),
        ("l2", tarfile.SYMTYPE, 0, "t" * 101),
    ],
)
def test_a_header_is_written_as_tarfile_writes_it(
    name: str, kind: bytes, size: int, link: str
) -> None:
    ti = tarfile.TarInfo(name)
    ti.type, ti.size, ti.linkname, ti.mode, ti.mtime = kind, size, link, 0o640, 1_700_000_000
    ti.uid, ti.gid, ti.uname, ti.gname = 1000, 1000, "", ""
    fast = _archive._ustar(ti)
    assert (fast is None) == (
        len(name) > 99 + (kind != tarfile.DIRTYPE)
        or not name.isascii()
        or size >= 8**11
        or len(link) > 100
    )
    assert (fast or b"") in (b"", ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
