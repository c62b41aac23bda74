"""push/pull against a real box: fidelity, large files, and a box that tries to escape."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from .conftest import Server


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


def test_pull_refuses_symlinks_out_of_dest(server: Server, box: str, tmp_path: Path) -> None:
    server.sh(
        box,
        "mkdir -p /config/evil && ln -s /etc/passwd /config/evil/pw && echo x > /config/evil/ok",
    )
    done = server.cli("pull", box, "/config/evil", "--to", str(tmp_path / "dest"))
    assert done.returncode == 1 and "points outside" in done.stderr
    assert not (tmp_path / "dest" / "pw").exists()


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
        (["push", "{box}", "{file}", "--to", "/config/f.txt/sub/"], "cannot use"),
    ],
)
def test_bad_paths(server: Server, box: str, tmp_path: Path, args: list[str], message: str) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    server.cli("exec", box, "--", "touch", "/config/f.txt", check=True)
    done = server.cli(*[a.format(box=box, file=f) for a in args])
    assert done.returncode == 1 and message in done.stderr.lower(), done.stderr
