"""Renaming a box's /etc/hosts entry: only the name, wherever it stands as one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paddockd.runtime.hostname import _rewrite, renamed_hosts

DOCKER_HOSTS = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "# 3f2a9c1b2d4e was here\n"
    "10.213.0.5\t3f2a9c1b2d4e\n"
    "10.213.0.9\t3f2a9c1b2d4e-db other.3f2a9c1b2d4e 3f2a9c1b2d4e\n"
)


def test_only_the_old_name_as_a_name_is_replaced() -> None:
    renamed = renamed_hosts(DOCKER_HOSTS, "3f2a9c1b2d4e", "web")
    assert renamed.splitlines() == [
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "# 3f2a9c1b2d4e was here",
        "10.213.0.5\tweb",
        "10.213.0.9\t3f2a9c1b2d4e-db other.3f2a9c1b2d4e web",
    ]
    assert renamed_hosts(DOCKER_HOSTS, "", "web") == DOCKER_HOSTS


def test_a_file_is_rewritten_in_place_and_nothing_else_is(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(DOCKER_HOSTS)
    inode = hosts.stat().st_ino
    _rewrite(str(hosts), lambda text: renamed_hosts(text, "3f2a9c1b2d4e", "web"))
    assert hosts.stat().st_ino == inode  # the engine's bind stays on this very file
    assert "10.213.0.5\tweb\n" in hosts.read_text()
    link = tmp_path / "link"
    link.symlink_to(hosts)
    with pytest.raises(OSError):
        _rewrite(str(link), lambda _: "x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):  # and no hang on opening it
        _rewrite(str(fifo), lambda _: "x")
