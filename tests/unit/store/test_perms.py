"""State files are root's alone: the fix-up of a data dir an older paddockd left readable,
and what it must leave as it is (links, the engine's root, a box's run folder)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

from paddockd.__main__ import private_state
from paddockd.config import Config, EngineConfig
from paddockd.store.perms import make_private, make_stream_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def old_layout(data: Path) -> dict[str, Path]:
    """What paddockd wrote under umask 022, plus a box's run folder, links and a FIFO."""
    paths = {
        "db": data / "paddock.db",
        "key": data / "desktop.key",
        "egress": data / "boxes" / "b1" / "egress.jsonl",
        "record": data / "runs" / "r1.json",
        "script": data / "bin" / "runtime",
        "run": data / "boxes" / "b1" / "run",
        "in_run": data / "boxes" / "b1" / "run" / "desktop",
        "engine": data / "engine",
    }
    for key in ("db", "key", "egress", "record", "script"):
        paths[key].parent.mkdir(parents=True, exist_ok=True)
        paths[key].write_text(key)
        paths[key].chmod(0o644)
    paths["script"].chmod(0o755)
    for key in ("in_run", "engine"):
        paths[key].mkdir(parents=True)
    for folder in (data, data / "boxes", data / "boxes" / "b1", data / "runs", paths["run"]):
        folder.chmod(0o755)
    paths["in_run"].chmod(0o755)
    paths["engine"].chmod(0o710)
    return paths


def test_make_private_takes_group_and_other_bits_off_and_keeps_the_owners(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    paths = old_layout(data)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    os.mkfifo(data / "fifo", 0o644)
    make_private(data, 0o700, skip=lambda p: p == paths["run"])
    assert mode(data) == 0o700
    for key in ("db", "key", "egress", "record"):
        assert mode(paths[key]) == 0o600, key
    assert mode(paths["script"]) == 0o700  # still executable by its owner
    assert mode(data / "boxes") == mode(data / "boxes" / "b1") == 0o700
    # Left alone: what a skipped folder holds, a link's target, a FIFO (never opened).
    assert mode(paths["run"]) == mode(paths["in_run"]) == 0o755
    assert mode(outside) == 0o644
    assert mode(data / "fifo") == 0o644


def test_private_state_leaves_the_engine_root_and_what_boxes_read(tmp_path: Path) -> None:
    data = tmp_path / "data"
    paths = old_layout(data)
    engine = replace(
        EngineConfig(), data_root=str(data / "engine"), log_file=str(tmp_path / "e.log")
    )
    (tmp_path / "e.log").write_text("engine says")
    (tmp_path / "e.log").chmod(0o644)
    resolv = paths["run"].parent / "resolv.conf"  # the box's /etc/resolv.conf
    resolv.write_text("nameserver 10.0.0.1\n")
    resolv.chmod(0o600)  # as an earlier version's start left it
    private_state(replace(Config(), data_dir=data, engine=engine))
    assert mode(resolv) == 0o644
    # dockerd needs its data root's parents traversable by the boxes' root (o+x).
    assert mode(data) == 0o711
    assert mode(paths["engine"]) == 0o710
    assert mode(paths["run"]) == 0o755
    assert mode(paths["db"]) == mode(tmp_path / "e.log") == 0o600
    # An engine elsewhere: the data dir is 0700.
    elsewhere = replace(engine, data_root=str(tmp_path / "engine"))
    private_state(replace(Config(), data_dir=data, engine=elsewhere))
    assert mode(data) == 0o700


def test_a_log_file_behind_stdout_is_made_private_and_a_pipe_left_alone(
    tmp_path: Path,
) -> None:
    log = tmp_path / "paddockd.log"
    log.write_text("")
    log.chmod(0o644)
    with log.open("ab") as f:
        make_stream_private(f.fileno())
    assert mode(log) == 0o600
    read, write = os.pipe()
    try:
        make_stream_private(write)
    finally:
        os.close(read)
        os.close(write)
