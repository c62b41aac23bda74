"""A hostile box against `paddock pull`: as root in a real box it builds trees meant to make
the client write outside DEST or through a link (the review's symlink chain, a fifo, a
folder swapped for a link while the pull runs), and pulls them with the real CLI. Links
are kept as the box has them, wherever they point (as docker cp keeps them); each test
aims at a sentinel beside DEST and checks that nothing there changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ...contained import snapshot
from ..conftest import Server


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "outside"
    target.mkdir()
    (target / "sentinel").write_text("untouched")
    before = snapshot(tmp_path, skip="dest")
    yield target
    assert snapshot(tmp_path, skip="dest") == before


def pull(server: Server, box: str, src: str, dest: Path) -> tuple[int, str]:
    dest.mkdir()
    done = server.cli("pull", box, src, "--to", str(dest), timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr.strip()


def test_the_symlink_chain(server: Server, box: str, tmp_path: Path, outside: Path) -> None:
    # DEST/evil/d0/…/d4/b1 -> .. is d3, each b<n> -> b<n-1>/.. one folder higher: b7 is the
    # folder that holds DEST. Every link passes a lexical check of its own.
    ups = "../" * (len(tmp_path.resolve().parts) - 1)
    server.sh(
        box,
        "set -e; mkdir -p /config/evil/d0/d1/d2/d3/d4; cd /config/evil/d0/d1/d2/d3/d4; "
        "ln -s .. b1; for n in 2 3 4 5 6 7; do ln -s b$((n - 1))/.. b$n; done; "
        f"ln -s b7/outside/sentinel host; ln -s b7/{ups}etc host_etc; echo ok > /config/evil/f",
        user="root",
    )
    code, err = pull(server, box, "/config/evil", tmp_path / "dest")
    assert code == 0, err
    # Kept as links, as the box has them; the pull wrote nothing through them.
    deep = tmp_path / "dest/evil/d0/d1/d2/d3/d4"
    assert all((deep / name).is_symlink() for name in ("b6", "b7", "host", "host_etc"))
    assert (tmp_path / "dest/evil/f").read_text() == "ok\n"


def test_a_fifo_and_an_absolute_link(
    server: Server, box: str, tmp_path: Path, outside: Path
) -> None:
    server.sh(
        box,
        f"set -e; mkdir -p /config/fifo /config/abs; mkfifo /config/fifo/pipe; "
        f"ln -s {outside}/sentinel /config/abs/sentinel",
        user="root",
    )
    code, err = pull(server, box, "/config/fifo", tmp_path / "dest-fifo")
    assert code == 1 and "a fifo" in err and "\n" not in err, err
    assert list((tmp_path / "dest-fifo").iterdir()) == []  # nothing of the refused pull
    code, err = pull(server, box, "/config/abs", tmp_path / "dest-abs")
    assert code == 0, err
    link = tmp_path / "dest-abs/abs/sentinel"
    assert link.is_symlink() and str(link.readlink()) == f"{outside}/sentinel"


def test_hard_links_inside_the_tree_stay_links(server: Server, box: str, tmp_path: Path) -> None:
    server.sh(
        box, "set -e; mkdir -p /config/hl; echo data > /config/hl/a; ln /config/hl/a /config/hl/b"
    )
    code, err = pull(server, box, "/config/hl", tmp_path / "dest")
    assert code == 0, err
    a, b = tmp_path / "dest/hl/a", tmp_path / "dest/hl/b"
    assert b.read_text() == "data\n" and a.stat().st_ino == b.stat().st_ino


SWAP = """
import os, time
os.chdir("/config/race")
while not os.path.exists("/tmp/stop-swap"):
    for link in ("../../outside", "."):
        os.rename("d", "d.real")
        os.symlink(link, "d")
        time.sleep(0.0005)
        os.unlink("d")
        os.rename("d.real", "d")
"""


def test_a_tree_that_changes_during_the_pull(
    server: Server, box: str, tmp_path: Path, outside: Path
) -> None:
    # While the engine walks the tree, `d` flips between a folder and a link, aimed at
    # the sentinel's folder or at its own parent: the archive may hold `d` as either,
    # and members under `d` after `d` became a link.
    server.sh(
        box,
        "set -e; mkdir -p /config/race/d; "
        "for i in $(seq 300); do echo $i > /config/race/d/f$i; done; "
        f"cat > /tmp/swap.py <<'EOF'\n{SWAP}\nEOF\n"
        "setsid nohup python3 /tmp/swap.py >/dev/null 2>&1 < /dev/null &",
        user="root",
    )
    try:
        for i in range(8):
            code, err = pull(server, box, "/config/race", tmp_path / f"dest{i}")
            assert code == 0 or err.startswith("paddock: "), err
    finally:
        server.sh(box, "touch /tmp/stop-swap", user="root")
    assert not list(outside.glob("f*"))
