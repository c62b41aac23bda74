"""push, pull and cp against a real box: fidelity, large files, a box that tries to escape,
where copies land (docker cp's rules, both ways), and the files API's owners and errors."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import posixpath
import re
import shlex
import shutil
import stat
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import paddock

from .conftest import ROOT, Server


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def test_round_trip_keeps_bytes_modes_links_and_empty_dirs(
    server: Server, box: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "empty").mkdir(parents=True)
    (src / "deep" / "er").mkdir(parents=True)
    (src / "blob.bin").write_bytes(os.urandom(300_000))
    (src / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (src / "tool.sh").chmod(0o750)
    (src / "deep" / "er" / "note.txt").write_text("ünïcødé\n")
    os.symlink("deep/er/note.txt", src / "shortcut")
    big = src / "big.dat"
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)
        f.seek(50 * 1024 * 1024)
        f.write(os.urandom(4096))
    server.cli("push", box, str(src), "--to", "/config/rt", check=True)
    inside = server.cli(
        "exec",
        box,
        "--",
        "bash",
        "-c",
        "stat -c '%U %a' /config/rt/tool.sh; ./rt/tool.sh",
        check=True,
    )
    assert inside.stdout.splitlines() == ["abc 750", "tool"]
    out = tmp_path / "out"
    server.cli("pull", box, "/config/rt", "--to", str(out), check=True)
    for rel in ("blob.bin", "tool.sh", "deep/er/note.txt", "big.dat"):
        assert digest(out / rel) == digest(src / rel), rel
    assert stat.S_IMODE((out / "tool.sh").stat().st_mode) == 0o750
    assert os.readlink(out / "shortcut") == "deep/er/note.txt"
    assert (out / "empty").is_dir() and list((out / "empty").iterdir()) == []


def test_single_file_push_and_pull(server: Server, box: str, tmp_path: Path) -> None:
    f = tmp_path / "hello.txt"
    f.write_text("hi\n")
    server.cli("push", box, str(f), "--to", "/config/renamed.txt", check=True)
    server.cli("push", box, str(f), "--to", "/config", check=True)
    listing = server.cli("exec", box, "--", "ls", "/config", check=True).stdout.split()
    assert "renamed.txt" in listing and "hello.txt" in listing
    server.cli("pull", box, "renamed.txt", "--to", str(tmp_path), check=True)
    assert (tmp_path / "renamed.txt").read_text() == "hi\n"


def test_paddockignore_and_exclude(server: Server, box: str, tmp_path: Path) -> None:
    src = tmp_path / "p"
    (src / "node_modules").mkdir(parents=True)
    (src / "node_modules" / "x.js").write_text("x")
    (src / "keep.js").write_text("k")
    (src / "secret.env").write_text("s")
    (src / "build.log").write_text("l")
    (src / ".paddockignore").write_text("node_modules/\n*.env\n")
    server.cli("push", box, str(src), "--to", "ign", "--exclude", "*.log", check=True)
    listing = server.cli("exec", box, "--", "ls", "-A", "/config/ign", check=True).stdout.split()
    assert sorted(listing) == [".paddockignore", "keep.js"]


def test_pull_of_a_project_keeps_its_links_and_leaves_out_what_is_excluded(
    server: Server, box: str, tmp_path: Path
) -> None:
    # A project as an agent leaves it: a virtualenv whose python points at the box's, the
    # .bin links of node_modules, and caches to leave behind.
    server.sh(
        box,
        "set -e; cd /config; mkdir -p proj/.venv/bin proj/node_modules/mocha/bin "
        "proj/node_modules/.bin proj/src/__pycache__; ln -s /usr/bin/python3 "
        "proj/.venv/bin/python3; ln -s python3 proj/.venv/bin/python; echo m > "
        "proj/node_modules/mocha/bin/mocha.js; ln -s ../mocha/bin/mocha.js "
        "proj/node_modules/.bin/mocha; echo 'print(1)' > proj/src/app.py; "
        "echo junk > proj/src/__pycache__/app.pyc",
    )
    dest = tmp_path / "dest"
    done = server.cli("pull", box, "/config/proj", "--to", str(dest))
    assert done.returncode == 0, done.stderr
    assert (dest / ".venv/bin/python3").readlink() == Path("/usr/bin/python3")
    assert (dest / "node_modules/.bin/mocha").read_text() == "m\n"
    again = tmp_path / "again"
    done = server.cli(
        "pull", box, "/config/proj", "--to", str(again),
        "--exclude", ".venv/", "--exclude", "__pycache__/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (again / ".venv").exists() and not (again / "src/__pycache__").exists()
    assert (again / "src/app.py").read_text() == "print(1)\n"


def test_a_failed_pull_leaves_dest_as_it_was(server: Server, box: str, tmp_path: Path) -> None:
    server.sh(
        box,
        "set -e; mkdir -p /config/half/a; echo new > /config/half/a/f; echo x > /config/half/z; "
        "mkfifo /config/half/zz-pipe",
        user="root",
    )
    (tmp_path / "half").mkdir()
    (tmp_path / "half/mine.txt").write_text("mine")
    done = server.cli("pull", box, "/config/half", "--to", str(tmp_path), "--force")
    assert done.returncode == 1 and "a fifo" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["half", "mine.txt"]


def test_pull_never_writes_through_a_symlink_left_in_dest(
    server: Server, box: str, tmp_path: Path
) -> None:
    # An earlier pull (or anything) left dest/out/link -> outside; the box now offers
    # out/link as a real folder with a file in it. Writing it must not follow the link.
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    (dest / "out").mkdir(parents=True)
    os.symlink(outside, dest / "out" / "link")
    server.cli(
        "exec",
        box,
        "--",
        "bash",
        "-c",
        "mkdir -p /config/out/link && echo pwned > /config/out/link/f",
        check=True,
    )
    refused = server.cli("pull", box, "/config/out", "--to", str(dest))
    assert refused.returncode == 1 and "--force" in refused.stderr
    # With --force the planted link is replaced by the real folder; nothing goes through it.
    server.cli("pull", box, "/config/out", "--to", str(dest), "--force", check=True)
    assert list(outside.iterdir()) == []
    link = dest / "out" / "link"
    assert not link.is_symlink() and (link / "f").read_text() == "pwned\n"


def test_pull_into_existing_file_asks_for_force(server: Server, box: str, tmp_path: Path) -> None:
    server.cli("exec", box, "--", "bash", "-c", "echo new > /config/f.txt", check=True)
    target = tmp_path / "f.txt"
    target.write_text("old\n")
    refused = server.cli("pull", box, "f.txt", "--to", str(target))
    assert refused.returncode == 1 and "--force" in refused.stderr and target.read_text() == "old\n"
    server.cli("pull", box, "f.txt", "--to", str(target), "--force", check=True)
    assert target.read_text() == "new\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["push", "{box}", "/no/such/path", "--to", "/config/x"], "no such file"),
        (["pull", "{box}", "/no/such/path"], "no such file"),
        (["push", "{box}", "{file}", "--to", "/config/f.txt/sub/"], "no such folder"),
    ],
)
def test_bad_paths(server: Server, box: str, tmp_path: Path, args: list[str], message: str) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    server.cli("exec", box, "--", "touch", "/config/f.txt", check=True)
    done = server.cli(*[a.format(box=box, file=f) for a in args])
    assert done.returncode == 1 and message in done.stderr.lower(), done.stderr


# -- where copies land: docker cp's rules, the same both ways ---------------------------
#
# Each side starts with the same tree under w/: a file, a folder with a subfolder, an
# existing folder and an existing file to copy onto. A case copies SRC to DEST one way and
# checks which paths exist afterwards on the receiving side (or the one-line error).

TREE = {
    "src.txt": "file",
    "srcdir/a.txt": "a",
    "srcdir/sub/b.txt": "b",
    "destdir/keep.txt": "keep",
    "dest.txt": "dest",
}
BASE = set(TREE) | {"srcdir", "srcdir/sub", "destdir"}
INSIDE = {"srcdir", "srcdir/a.txt", "srcdir/sub", "srcdir/sub/b.txt"}  # a copy of srcdir


def under(folder: str, paths: set[str]) -> set[str]:
    return {f"{folder}/{p}" for p in paths}


RULES = [
    # (SRC, DEST, paths added under w/, or the error)
    ("src.txt", "destdir", {"destdir/src.txt"}),
    ("src.txt", "new.txt", {"new.txt"}),
    ("src.txt", "newdir/", "(DEST ends in /)"),
    ("src.txt", "no/such/f", "no such folder"),
    ("srcdir", "copy", {"copy"} | under("copy", {"a.txt", "sub", "sub/b.txt"})),
    ("srcdir", "destdir", under("destdir", INSIDE)),
    ("srcdir/", "destdir", under("destdir", INSIDE)),  # a trailing / changes nothing
    ("srcdir/.", "destdir", under("destdir", {"a.txt", "sub", "sub/b.txt"})),
    ("srcdir/.", "fresh", {"fresh"} | under("fresh", {"a.txt", "sub", "sub/b.txt"})),
    ("srcdir", "dest.txt", "onto the file"),
    ("src.txt/.", "destdir", "is not a folder"),
]


@pytest.fixture(scope="module")
def rules_box(server: Server) -> Iterator[str]:
    """One box for every rule case (each starts by laying its tree anew)."""
    name = f"t-rules-{uuid.uuid4().hex[:6]}"
    with server.client() as c:
        c.create_box(name, ttl=900)
    yield name
    with server.client() as c, contextlib.suppress(Exception):
        c.delete_box(name, force=True)


def lay_local(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def lay_in_box(server: Server, box: str) -> None:
    script = "rm -rf /config/w && mkdir -p /config/w && cd /config/w && " + " && ".join(
        f"mkdir -p {shlex.quote(posixpath.dirname(rel) or '.')} && "
        f"printf %s {shlex.quote(text)} > {shlex.quote(rel)}"
        for rel, text in TREE.items()
    )
    server.sh(box, script)


def local_paths(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def box_paths(server: Server, box: str) -> set[str]:
    out = server.sh(box, "cd /config/w && find . -mindepth 1 | cut -c3-")
    return set(out.split())


@pytest.mark.parametrize("direction", ["push", "pull"])
@pytest.mark.parametrize(("src", "dest", "outcome"), RULES)
def test_where_a_copy_lands(
    server: Server,
    rules_box: str,
    tmp_path: Path,
    direction: str,
    src: str,
    dest: str,
    outcome: set[str] | str,
) -> None:
    local = tmp_path / "w"
    lay_local(local)
    lay_in_box(server, rules_box)
    if direction == "push":
        done = server.cli("push", rules_box, f"{local}/{src}", "--to", f"/config/w/{dest}")
        after = box_paths(server, rules_box)
    else:
        done = server.cli("pull", rules_box, f"/config/w/{src}", "--to", f"{local}/{dest}")
        after = local_paths(local)
    assert "Traceback" not in done.stderr
    if isinstance(outcome, str):
        assert done.returncode == 1 and outcome in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1  # one line, nothing copied
        assert after == BASE
    else:
        assert done.returncode == 0, done.stderr
        assert after == BASE | outcome


def test_a_file_onto_a_file(server: Server, rules_box: str, tmp_path: Path) -> None:
    # push replaces it (as docker cp does); pull keeps the local one unless --force.
    local = tmp_path / "w"
    lay_local(local)
    lay_in_box(server, rules_box)
    server.cli("push", rules_box, str(local / "src.txt"), "--to", "/config/w/dest.txt", check=True)
    assert server.sh(rules_box, "cat /config/w/dest.txt") == "file"
    lay_in_box(server, rules_box)
    refused = server.cli("pull", rules_box, "/config/w/src.txt", "--to", str(local / "dest.txt"))
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert (local / "dest.txt").read_text() == "dest"


def test_a_file_never_replaces_a_folder_in_the_box(
    server: Server, rules_box: str, tmp_path: Path
) -> None:
    lay_in_box(server, rules_box)
    (tmp_path / "destdir").write_text("a file named as the box's folder")
    done = server.cli("push", rules_box, str(tmp_path / "destdir"), "--to", "/config/w")
    assert done.returncode == 1
    assert "/config/w/destdir in the box is a folder: a file cannot replace it" in done.stderr
    assert server.sh(rules_box, "cat /config/w/destdir/keep.txt") == "keep"


def test_the_readme_examples_run_twice_do_not_nest(
    server: Server, rules_box: str, tmp_path: Path
) -> None:
    readme = (ROOT / "README.md").read_text()
    push = re.search(r"^(paddock push current \S+ --to \S+)", readme, re.M)
    pull = re.search(r"`(paddock pull current \S+\s+--to \S+)`", readme)
    assert push and pull, "the README's push and pull examples moved"
    (push_argv, pull_argv) = (
        [rules_box if w == "current" else w for w in shlex.split(m[1])[1:]] for m in (push, pull)
    )
    project = tmp_path / "project"
    (project / "dist").mkdir(parents=True)
    (project / "dist" / "app.js").write_text("v1")
    for _ in range(2):
        server.cli(*push_argv, cwd=project, check=True)
    listing = server.sh(rules_box, "cd /config/project && find . | sort").split()
    assert listing == [".", "./dist", "./dist/app.js"]
    out = tmp_path / "out"
    out.mkdir()
    server.cli(*pull_argv, cwd=out, check=True)
    again = server.cli(*pull_argv, cwd=out)
    assert again.returncode == 1 and "already exists; use --force" in again.stderr
    server.sh(rules_box, "echo v2 > /config/project/dist/app.js")
    server.cli(*pull_argv, "--force", cwd=out, check=True)
    assert local_paths(out) == {"dist", "dist/app.js"}  # never dist/dist
    assert (out / "dist" / "app.js").read_text() == "v2\n"


def test_cp_both_ways(server: Server, rules_box: str, tmp_path: Path) -> None:
    lay_in_box(server, rules_box)
    (tmp_path / "notes.txt").write_text("notes")
    server.cli("cp", str(tmp_path / "notes.txt"), f"{rules_box}:w/", check=True)
    assert server.sh(rules_box, "cat /config/w/notes.txt") == "notes"
    server.cli("cp", f"{rules_box}:/config/w/srcdir", str(tmp_path / "back"), check=True)
    assert local_paths(tmp_path / "back") == {"a.txt", "sub", "sub/b.txt"}
    server.cli("use", rules_box, check=True)
    server.cli("cp", "current:w/srcdir/.", str(tmp_path / "back"), "--force", check=True)
    both = server.cli("cp", f"{rules_box}:w/src.txt", f"{rules_box}:w/x")
    assert both.returncode == 2 and "one side of cp is local" in both.stderr


def test_a_missing_local_folder_is_one_line(server: Server, box: str, tmp_path: Path) -> None:
    server.sh(box, "echo x > /config/f.txt && mkdir -p /config/d")
    for src in ("f.txt", "d"):
        done = server.cli("pull", box, src, "--to", str(tmp_path / "missing" / "dir" / "f"))
        assert done.returncode == 1, done.stderr
        assert done.stderr == f"paddock: no such folder: {tmp_path / 'missing' / 'dir'}\n"
    (tmp_path / "file").write_text("x")
    done = server.cli("pull", box, "f.txt", "--to", str(tmp_path / "file" / "f"))
    assert done.stderr == f"paddock: {tmp_path / 'file'} is not a folder\n"
    new = server.cli("pull", box, "f.txt", "--to", f"{tmp_path / 'newdir'}/")
    assert new.returncode == 1 and "(DEST ends in /)" in new.stderr
    assert not (tmp_path / "newdir").exists()  # never a file named newdir
    server.cli("pull", box, "d", "--to", f"{tmp_path / 'newdir'}/", check=True)
    assert (tmp_path / "newdir").is_dir()  # a folder may become newdir/


# -- the files API: the box's owners, and a body that is not a tar ----------------------


def test_owners_are_the_boxs_in_pulls_and_stats(server: Server, box: str) -> None:
    server.sh(box, "mkdir -p /config/own && echo a > /config/own/abc.txt")
    server.sh(box, "echo r > /config/own/root.txt", user="root")
    headers = {"Authorization": f"Bearer {server.token}"}
    url = f"{server.url}/v1/boxes/{box}/files"
    with httpx.Client(headers=headers) as http:
        pulled = http.get(url, params={"path": "/config/own"})
        with tarfile.open(fileobj=io.BytesIO(pulled.content)) as tar:
            owners = {m.name: (m.uid, m.gid) for m in tar.getmembers()}
        stats = [
            http.get(f"{url}/stat", params={"path": f"/config/own/{f}"}).json()
            for f in ("abc.txt", "root.txt")
        ]
        header = json.loads(base64.b64decode(pulled.headers["x-paddock-stat"]))
    assert owners == {"own": (1000, 1000), "own/abc.txt": (1000, 1000), "own/root.txt": (0, 0)}
    assert [(s["uid"], s["gid"]) for s in stats] == [(1000, 1000), (0, 0)]
    assert (header["type"], header["uid"]) == ("dir", 1000)


def test_a_push_body_that_is_not_a_tar_is_a_bad_request(server: Server, box: str) -> None:
    with httpx.Client(headers={"Authorization": f"Bearer {server.token}"}) as http:
        resp = http.put(
            f"{server.url}/v1/boxes/{box}/files",
            params={"path": "/config/x"},
            content=b"this is not a tar archive",
        )
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_request" and "not a valid tar archive" in error["message"]


def test_list_and_download_through_the_sdk(server: Server, box: str, tmp_path: Path) -> None:
    """A folder's listing as the box user reads it; a file downloaded as it is (a link, as
    what it leads to) and a folder as a zip and a tar holding nothing that leads out: the
    hostile links are left out, the rest arrives identical, sparse data included."""
    server.sh(
        box,
        "mkdir -p /config/dl/sub && cd /config/dl && head -c 2000000 /dev/urandom > sub/blob && "
        "truncate -s 30M sparse && printf tail >> sparse && echo hi > 'we ird\"name;.txt' && "
        "ln -s sub/blob inside && ln -s /etc/shadow shadow && ln -s ../.. up && "
        "ln -s sub/../.. sneaky && mkfifo pipe && chmod 4755 sub/blob",
    )
    with server.client() as c:
        listing = c.list_files(box, "dl")
        kinds = {e.name: (e.type, e.target, e.target_type) for e in listing.entries}
        assert listing.path == "/config/dl" and not listing.truncated
        assert kinds == {
            "inside": ("symlink", "sub/blob", "file"),
            "pipe": ("other", None, None),
            "shadow": ("symlink", "/etc/shadow", "file"),
            "sneaky": ("symlink", "sub/../..", "dir"),
            "sparse": ("file", None, None),
            "sub": ("dir", None, None),
            "up": ("symlink", "../..", "dir"),
            'we ird"name;.txt': ("file", None, None),
        }
        with pytest.raises(paddock.NotFound):
            c.list_files(box, "/config/nope")
        with pytest.raises(paddock.InvalidRequest, match="not a folder"):
            c.list_files(box, "/config/dl/sparse")

        blob = server.sh(box, "sha256sum /config/dl/sub/blob | cut -d' ' -f1").strip()
        sparse = server.sh(box, "sha256sum /config/dl/sparse | cut -d' ' -f1").strip()
        got = c.download(box, "/config/dl/inside", tmp_path / "blob")
        assert digest(got) == blob
        with pytest.raises(paddock.Conflict):
            c.download(box, "/config/dl/inside", tmp_path / "blob")

        zipped = c.download(box, "dl", tmp_path / "dl.zip")
        with zipfile.ZipFile(zipped) as zf:
            assert sorted(zf.namelist()) == [
                "dl/",
                "dl/inside",
                "dl/sparse",
                "dl/sub/",
                "dl/sub/blob",
                'dl/we ird"name;.txt',
            ]
            assert hashlib.sha256(zf.read("dl/sparse")).hexdigest() == sparse
            assert (zf.getinfo("dl/sub/blob").external_attr >> 16) & 0o7777 == 0o755
        tarred = c.download(box, "dl", tmp_path / "dl.tar", archive="tar")
        with tarfile.open(tarred) as tar:
            names = sorted(tar.getnames())
            tar.extractall(tmp_path / "x", filter="data")
        assert names == [
            "dl",
            "dl/inside",
            "dl/sparse",
            "dl/sub",
            "dl/sub/blob",
            'dl/we ird"name;.txt',
        ]
        assert digest(tmp_path / "x" / "dl" / "inside") == blob  # the kept link, followed


def test_a_download_is_never_rendered(server: Server, box: str) -> None:
    server.sh(box, "echo '<script>alert(1)</script>' > '/config/page.html'")
    got = httpx.get(
        f"{server.url}/v1/boxes/{box}/files/download",
        params={"path": "/config/page.html"},
        headers={"Authorization": f"Bearer {server.token}"},
    )
    assert got.status_code == 200 and got.content == b"<script>alert(1)</script>\n"
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith('attachment; filename="page.html"')
    assert got.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in got.headers["content-security-policy"]
    assert got.headers["content-length"] == str(len(got.content))
