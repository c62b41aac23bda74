"""A hostile box against the desktop: paddockd (host root) connects to the VNC socket in
the box's run folder. The box replaces its own `paddock-desktop` and plants links there
pointing at host sockets: a bait listener the test owns, and the box engine's own socket
(whose control would be host root). Every desktop path must refuse, and the bait must
see no connection."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import PaddockError

from ..conftest import ENGINE_SOCKET, Server


class Bait:
    """A unix socket on the host that records every connection made to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted = 0
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(str(path))
        path.chmod(0o777)
        self._srv.listen(8)
        self._srv.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.sendall(b"RFB 003.008\n")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._srv.close()


@pytest.fixture
def bait(tmp_path: Path) -> Iterator[Bait]:
    tmp_path.chmod(0o755)
    b = Bait(tmp_path / "bait.sock")
    yield b
    b.close()


@pytest.fixture
def desk(server: Server) -> Iterator[str]:
    name = f"hd-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--type", "medium", check=True)
    yield name
    server.cli("rm", "--force", name)


def plant(server: Server, box: str, target: str, *, whole_folder: bool = False) -> None:
    """As root in the box: stop the real desktop, make `paddock-desktop start` a no-op and
    put a link where the VNC socket belongs (or make the whole folder a link)."""
    link = (
        f"rm -rf /run/paddock/desktop; ln -s {Path(target).parent} /run/paddock/desktop"
        if whole_folder
        else f"mkdir -p /run/paddock/desktop; ln -sfn {target} /run/paddock/desktop/vnc.sock"
    )
    server.sh(
        box,
        "[ -f /run/paddock-desktop/loops ] && xargs -r kill </run/paddock-desktop/loops; "
        "pkill -x Xvnc; sleep 0.3; "
        'printf "#!/bin/sh\\nexit 0\\n" > "$(command -v paddock-desktop)"; '
        f"rm -f /run/paddock/desktop/vnc.sock; {link}",
        user="root",
    )


@pytest.mark.parametrize("whole_folder", [False, True])
def test_links_in_the_run_folder_are_never_followed(
    server: Server, desk: str, bait: Bait, whole_folder: bool
) -> None:
    plant(server, desk, str(bait.path), whole_folder=whole_folder)
    with server.client() as c:
        with pytest.raises(PaddockError):
            c.desktop_link(desk)
        with pytest.raises(PaddockError):
            c.screenshot(desk)
    assert bait.accepted == 0


def test_a_link_to_the_engine_socket_gives_no_engine(server: Server, desk: str) -> None:
    """The review's repro: a full-control desktop link, then the socket swapped for a link
    to Paddock's engine. The browser bridge must refuse instead of relaying to dockerd."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    link = json.loads(server.cli("desktop", desk, "--json", check=True).stdout)
    box_id = link["url"].split("/desktop/")[1].split("?")[0]
    plant(server, desk, ENGINE_SOCKET)
    ws = server.url.replace("http", "ws", 1) + f"/v1/boxes/{box_id}/desktop/ws"
    try:
        with connect(f"{ws}?token={link['token']}", open_timeout=10) as conn:
            conn.send(b"GET /_ping HTTP/1.0\r\n\r\n")
            answer = conn.recv(timeout=5)
    except InvalidStatus:
        return  # refused before the bridge opened: the right outcome
    pytest.fail(f"the desktop bridge relayed to the engine: {answer[:80]!r}")
