"""Ending a command and everything it started, by host pids read from /proc (the
kernel's word, not the box's).

A tree that is signalled while it forks can lose a child: one born after the tree was
read outlives the signal, is reparented to the box's init, and keeps the command's
output open, so the exec never ends. So the tree is first stopped (SIGSTOP cannot be
caught, and a stopped process forks nothing; each is waited for until it has stopped),
read again until no new process appears, and only then signalled: TERM, then KILL for
what is left after the grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

Member = tuple[int, str]  # pid, start time (so a reused pid is never signalled)


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0], fields[19]


def start_time(pid: int) -> str | None:
    """A live process's start time (a pid reused later has another)."""
    st = _stat(pid)
    return st[2] if st is not None else None


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            found.setdefault(st[0], []).append(int(entry))
    return found


def _alive(member: Member) -> bool:
    st = _stat(member[0])
    return st is not None and st[2] == member[1] and st[1] != "Z"


def _signal(member: Member, sig: signal.Signals) -> None:
    if _alive(member):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member[0], sig)


def freeze(root: int) -> list[Member]:
    """Stop `root` and all its descendants; them, read until the tree holds still."""
    members: dict[int, str] = {}
    for _ in range(1000):  # a tree grows only by forks already under way: this ends
        children = _children()
        todo, new = [root, *members], []
        seen = set(todo)
        while todo:
            pid = todo.pop()
            for child in children.get(pid, []):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
            if pid not in members and (st := _stat(pid)) is not None:
                new.append(pid)
                members[pid] = st[2]
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
        if not new:
            break
        _until_stopped(new)
    return list(members.items())


def _until_stopped(pids: list[int], within: float = 5.0) -> None:
    """Wait until each has stopped (or ended): a signal takes effect a moment after it is
    sent, and a process still running then may fork after the tree was read again. One
    that cannot stop yet (in uninterruptible sleep, or on a loaded host) is waited for
    `within` seconds."""
    deadline = time.monotonic() + within
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if (st := _stat(p)) is not None and st[1] not in "TtZX"]
        if waiting:
            time.sleep(0.001)


def end_tree(root: int, grace: float = 2.0) -> None:
    """TERM a process and its descendants, then KILL what is left after `grace` seconds.
    Blocking."""
    members = freeze(root)
    for member in members:
        _signal(member, signal.SIGTERM)
        _signal(member, signal.SIGCONT)  # a stopped process acts on TERM once it runs
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(m) for m in members):
        time.sleep(0.05)
    for member in members:
        _signal(member, signal.SIGKILL)
