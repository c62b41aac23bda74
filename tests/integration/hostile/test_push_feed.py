"""A hostile box against a push's socket (runtime/feed.py), which paddockd, as host root,
makes in the box's own run folder: only the box's root may connect to it (its other users
are refused), and what the box does to its name never reaches past the box. Then a push
into a box whose python3 is gone: the archive goes on the exec's stdin instead."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import docker

from paddockd.runtime.docker import _run_bind
from paddockd.runtime.feed import Feed

from ...harness import ENGINE_SOCKET
from ..conftest import Server

CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as exc:
    print(type(exc).__name__)
"""


def _run_folder(server: Server, box: str) -> Path:
    with server.client() as c:
        cid = f"paddock-{c.get_box(box).id}"
    run = _run_bind(docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}").inspect_container(cid))
    assert run is not None
    return run


def _connect(server: Server, box: str, path: str, user: str) -> str:
    done = server.cli("exec", "-u", user, box, "--", "python3", "-c", CONNECT, path, check=True)
    return done.stdout.strip()


def test_only_the_box_root_connects_to_a_push_socket(server: Server, box: str) -> None:
    feed = Feed.open(_run_folder(server, box))
    assert feed is not None
    try:
        assert _connect(server, box, feed.box_path, "abc") == "PermissionError"
        assert _connect(server, box, feed.box_path, "root") == "connected"
    finally:
        feed.close()


def test_a_name_swapped_in_the_box_changes_nothing_outside(
    server: Server, box: str, tmp_path: Path
) -> None:
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("untouched")
    sentinel.chmod(0o640)
    run = _run_folder(server, box)
    feed = Feed.open(run)
    assert feed is not None
    name = feed.box_path.rsplit("/", 1)[1]
    # The box's root puts a link to a host file where the socket was: paddockd only ever
    # removes the name, never follows it.
    server.sh(box, f"cd /run/paddock && rm -f {name} && ln -s {sentinel} {name}", user="root")
    feed.close()
    assert sentinel.read_text() == "untouched"
    assert (sentinel.stat().st_mode & 0o777, sentinel.stat().st_uid) == (0o640, os.geteuid())
    assert not (run / name).is_symlink()


def test_a_box_without_python3_takes_a_push_on_stdin(
    server: Server, box: str, tmp_path: Path
) -> None:
    data = os.urandom(3 << 20)
    (tmp_path / "blob").write_bytes(data)
    server.sh(box, "mv /usr/bin/python3 /usr/bin/python3.away", user="root")
    try:
        server.cli("push", box, str(tmp_path / "blob"), "--to", "/config/blob", check=True)
        got = server.sh(box, "sha256sum /config/blob").split()[0]
    finally:
        server.sh(box, "mv /usr/bin/python3.away /usr/bin/python3", user="root")
    assert got == hashlib.sha256(data).hexdigest()


def test_a_push_goes_over_the_socket(server: Server, box: str, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("over the socket")
    # python3 as a wrapper that notes its last argument: the socket's path in the box.
    wrapper = (
        '#!/bin/sh\nfor a; do :; done; echo "$a" >> /tmp/py-last\nexec /usr/bin/python3.real "$@"\n'
    )
    server.sh(
        box,
        f"mv /usr/bin/python3 /usr/bin/python3.real && printf %s '{wrapper}' > /usr/bin/python3 "
        "&& chmod 755 /usr/bin/python3",
        user="root",
    )
    try:
        server.cli("push", box, str(tmp_path / "f.txt"), "--to", "/config/f.txt", check=True)
        last = server.sh(box, "cat /tmp/py-last").split()
    finally:
        server.sh(box, "mv /usr/bin/python3.real /usr/bin/python3", user="root")
    # The box's exec agent (runtime/agent.py) may have been started by python3 too.
    pushes = [a for a in last if not a.isdigit()]
    assert len(pushes) == 1 and pushes[0].startswith("/run/paddock/.paddock-put-"), last
    assert server.sh(box, "cat /config/f.txt") == "over the socket"
