"""Box inits kept by pidfd: a kept pid is used only while its process lives."""

from __future__ import annotations

import subprocess

from paddockd.netpolicy.inits import Inits


def test_a_kept_init_is_used_while_it_lives_and_asked_for_again_once_it_exits() -> None:
    init = subprocess.Popen(["sleep", "60"])
    asked: list[str] = []

    def pid_of(cid: str) -> int:
        asked.append(cid)
        return init.pid if init.poll() is None else 0

    inits = Inits(pid_of)
    try:
        assert inits.pid("c1") == init.pid
        inits.keep_only(["c1"])
        assert inits.pid("c1") == init.pid and asked == ["c1"]
        assert inits.pid("c1", fresh=True) == init.pid and asked == ["c1", "c1"]
    finally:
        init.kill()
        init.wait()  # its pid is free for any process from here on
    inits.keep_only(["c1"])
    assert inits.pid("c1") == 0 and asked == ["c1", "c1", "c1"]


def test_containers_no_longer_listed_are_forgotten() -> None:
    init = subprocess.Popen(["sleep", "60"])
    asked: list[str] = []
    inits = Inits(lambda cid: asked.append(cid) or init.pid)
    try:
        inits.pid("c1")
        inits.keep_only([])
        inits.pid("c1")
        assert asked == ["c1", "c1"]
        assert inits.pid("gone") == init.pid  # pid_of answers for any name here
        inits.close()
    finally:
        init.kill()
        init.wait()


def test_a_container_without_an_init_is_not_kept() -> None:
    asked: list[str] = []
    inits = Inits(lambda cid: asked.append(cid) or 0)
    assert inits.pid("c1") == 0 and inits.pid("c1") == 0
    assert asked == ["c1", "c1"]
