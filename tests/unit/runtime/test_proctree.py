"""Ending a process tree while it forks, with real processes: nothing it started keeps
its output open, a process that ignores TERM is killed after the grace, and a pid that
was reused is never signalled."""

from __future__ import annotations

import os
import select
import subprocess
import time

from paddockd.runtime import proctree


def output_closes(fd: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready and not os.read(fd, 65536):
            return True
    return False


def test_a_tree_forking_as_it_is_ended_leaves_nothing_holding_its_output() -> None:
    for _ in range(3):  # the race this guards against is one of timing: try it more than once
        read, write = os.pipe()
        # Forks without pause: a child born between reading the tree and signalling it
        # would outlive a plain walk-and-kill, holding the pipe open for ten minutes.
        proc = subprocess.Popen(
            ["bash", "-c", "while :; do sleep 600 & sh -c 'sleep 600' & done"],
            stdout=write,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        time.sleep(0.2)
        proctree.end_tree(proc.pid, grace=1.0)
        proc.wait(5)
        assert output_closes(read, 5), "a process of the tree still holds its output"
        os.close(read)


def test_what_ignores_term_is_killed_after_the_grace() -> None:
    proc = subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 600 & wait"])
    time.sleep(0.2)
    started = time.monotonic()
    proctree.end_tree(proc.pid, grace=0.5)
    assert proc.wait(5) != 0
    assert 0.4 < time.monotonic() - started < 3


def test_a_stopped_tree_is_all_of_it() -> None:
    proc = subprocess.Popen(["bash", "-c", "sleep 600 & sleep 600 & wait"])
    time.sleep(0.2)
    members = proctree.freeze(proc.pid)
    try:
        assert len(members) == 3
        assert proc.pid in dict(members)
        for pid, _ in members:
            with open(f"/proc/{pid}/stat") as f:
                assert f.read().rsplit(")", 1)[1].split()[0] == "T"  # stopped
    finally:
        proctree.end_tree(proc.pid, grace=0.5)
        proc.wait(5)


def test_a_reused_pid_is_not_signalled() -> None:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        member = (proc.pid, "1")  # another start time: another process's pid
        assert not proctree._alive(member)
        proctree._signal(member, proctree.signal.SIGKILL)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
