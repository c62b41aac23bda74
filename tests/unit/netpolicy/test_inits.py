"""Box inits kept by pidfd: a kept pid is used only while its process lives."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddockd.netpolicy.inits import Inits, first_container, in_container

# The container these tests' processes are in, if they run in one.
HERE = first_container(Path("/proc/self/cgroup").read_text()) or "c1"


@pytest.fixture
def init() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for a container's init."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    end(proc)


def end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()  # its pid is free for any process from here on


def test_a_kept_init_is_used_while_it_lives_and_asked_for_again_once_it_exits(
    init: subprocess.Popen[bytes],
) -> None:
    asked: list[str] = []

    def pid_of(cid: str) -> int:
        asked.append(cid)
        return init.pid if init.poll() is None else 0

    inits = Inits(pid_of)
    assert inits.pid(HERE) == init.pid
    inits.keep_only([HERE])
    assert inits.pid(HERE) == init.pid and asked == [HERE]
    assert inits.pid(HERE, fresh=True) == init.pid and asked == [HERE, HERE]
    end(init)
    inits.keep_only([HERE])
    assert inits.pid(HERE) == 0 and asked == [HERE, HERE, HERE]


def test_a_kept_init_is_alive_until_it_exits_or_is_dropped(init: subprocess.Popen[bytes]) -> None:
    """What one box's network sync asks before it keeps the box's port."""
    inits = Inits(lambda cid: init.pid)
    assert not inits.alive(HERE)  # never asked for
    inits.pid(HERE)
    assert inits.alive(HERE)
    inits.drop(HERE)
    assert not inits.alive(HERE)
    inits.pid(HERE)
    end(init)
    assert not inits.alive(HERE)
    inits.close()


def test_the_engines_recent_word_is_taken_for_an_init_and_checked_as_its_answer(
    init: subprocess.Popen[bytes],
) -> None:
    asked: list[str] = []
    inits = Inits(lambda cid: asked.append(cid) or init.pid)
    assert inits.pid(HERE, hint=init.pid) == init.pid and asked == []
    assert inits.alive(HERE)
    end(init)
    # A hint whose process is gone is not taken: the engine is asked.
    assert inits.pid(HERE, fresh=True, hint=init.pid) == 0 and asked == [HERE]
    inits.close()


def test_containers_no_longer_listed_are_forgotten(init: subprocess.Popen[bytes]) -> None:
    asked: list[str] = []
    inits = Inits(lambda cid: asked.append(cid) or init.pid)
    inits.pid(HERE)
    inits.keep_only([])
    inits.pid(HERE)
    assert asked == [HERE, HERE]
    assert inits.pid("gone") == init.pid  # pid_of answers for any name here
    inits.close()


def test_a_container_without_an_init_is_not_kept() -> None:
    asked: list[str] = []
    inits = Inits(lambda cid: asked.append(cid) or 0)
    assert inits.pid(HERE) == 0 and inits.pid(HERE) == 0
    assert asked == [HERE, HERE]


A = "a" * 64
B = "b" * 64


def test_the_container_of_a_cgroup_path_is_the_first_one_named() -> None:
    assert first_container(f"12:pids:/docker/{A}\n11:memory:/docker/{A}\n") == A
    assert first_container(f"0::/system.slice/docker-{A}.scope/init.scope\n") == A
    # A box names its own child cgroups as it likes: never a path above its own.
    assert first_container(f"12:pids:/docker/{A}/{B}\n") == A
    assert first_container("0::/user.slice/user-0.slice/session-1.scope\n") is None


def test_a_process_of_another_container_is_not_its_init() -> None:
    init = subprocess.Popen(["sleep", "60"])
    try:
        mine = first_container(Path(f"/proc/{init.pid}/cgroup").read_text())
        assert in_container(init.pid, mine or A)  # none named: no other box's either
        assert in_container(init.pid, B) is (mine is None)
    finally:
        init.kill()
        init.wait()
    assert not in_container(init.pid, A)  # gone
