"""Each box's desktop: started on demand (first desktop link, screenshot, input or
`exec --desktop`), looked at from the host over its VNC socket, driven with xdotool.

The box's `paddock-desktop start` does the starting (idempotent, waits until XFCE is up);
the socket is in the box's run folder, which the host sees, so screenshots and the browser
bridge need nothing in the box but Xvnc.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from ..desktop import png
from ..desktop.boxsocket import UnsafeSocket, connect_box_socket
from ..desktop.links import DesktopLinks, Grant
from ..desktop.rfb import RfbClient, RfbError
from ..domain.accounts import User
from ..domain.box import Box
from ..domain.errors import DesktopFailed, InvalidRequest
from ..runtime import inbox
from .boxes import BoxService

SESSION_ENV = {
    "DISPLAY": ":1",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/paddock-desktop/bus",
    "XDG_RUNTIME_DIR": "/run/paddock-desktop/xdg",
}
DEFAULT_SIZE = (1280, 800)
MIN_SIZE, MAX_SIZE = (320, 240), (3840, 2160)
_SIZE_RE = re.compile(r"^(\d{1,5})x(\d{1,5})$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_+\- ]{1,100}$")
_APP_LOG = "/run/paddock-desktop/apps.log"
VNC_SOCKET = "desktop/vnc.sock"  # in the box's run folder (its /run/paddock)
T = TypeVar("T")


def parse_size(text: str) -> tuple[int, int]:
    match = _SIZE_RE.match(text.strip())
    if not match:
        raise InvalidRequest(f"invalid desktop size {text!r}: use WIDTHxHEIGHT, e.g. 1280x800")
    width, height = int(match[1]), int(match[2])
    if not (MIN_SIZE[0] <= width <= MAX_SIZE[0] and MIN_SIZE[1] <= height <= MAX_SIZE[1]):
        raise InvalidRequest(
            f"desktop size {width}x{height} is out of range: "
            f"{MIN_SIZE[0]}x{MIN_SIZE[1]} to {MAX_SIZE[0]}x{MAX_SIZE[1]}"
        )
    return width, height


def detached(cmd: list[str]) -> list[str]:
    """The command started in its own session, its output in the desktop's app log."""
    return inbox.detached(cmd, _APP_LOG)


def grab(vnc: RfbClient, size: tuple[int, int] | None) -> bytes:
    with vnc:
        if size:
            vnc.resize(*size)
        frame = vnc.frame()
    return png.encode(frame.width, frame.height, frame.bgrx)


def resize(vnc: RfbClient, size: tuple[int, int]) -> None:
    with vnc:
        vnc.resize(*size)


class DesktopService:
    def __init__(
        self,
        boxes: BoxService,
        run_dir: Callable[[str], Path],
        links: DesktopLinks,
        link_ttl: int = 900,
        userns_base: int | None = None,
    ) -> None:
        self._boxes = boxes
        self._run_dir = run_dir
        self._links = links
        self.link_ttl = link_ttl
        self._userns_base = userns_base
        self._starting: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # Box id -> the start (started_at) since which its desktop is known to have drawn.
        self._drawn: dict[str, datetime | None] = {}

    def connect(self, box_id: str, timeout: float = 10.0) -> socket.socket:
        """The box's VNC socket, connected without following anything the box planted
        (blocking: for worker threads). OSError when nothing listens there."""
        return connect_box_socket(self._run_dir(box_id), VNC_SOCKET, self._userns_base, timeout)

    def _vnc(self, box_id: str, timeout: float = 10.0) -> RfbClient:
        try:
            sock = self.connect(box_id, timeout)
        except OSError as exc:
            raise RfbError(f"cannot reach the desktop's VNC server: {exc}") from exc
        return RfbClient(sock)

    async def _with_vnc(self, box_id: str, job: Callable[[RfbClient], T]) -> T:
        return await anyio.to_thread.run_sync(lambda: job(self._vnc(box_id)))

    async def ensure(
        self, ref: str, size: tuple[int, int] | None = None, caller: User | None = None
    ) -> Box:
        """Start the box's desktop unless it runs; resize it when asked."""
        box = await self._boxes.running(ref, caller)
        async with self._starting[box.id]:
            if not await self._answers(box):
                await self._start(box)
        if size:
            await self._with_vnc(box.id, lambda vnc: resize(vnc, size))
        return box

    async def _answers(self, box: Box) -> bool:
        def probe() -> bool:
            try:
                with self._vnc(box.id, timeout=2):
                    return True
            except UnsafeSocket:
                raise
            except RfbError:
                return False

        return await anyio.to_thread.run_sync(probe)

    async def _start(self, box: Box) -> None:
        code, out, err = await self._boxes.run(box.id, ["paddock-desktop", "start"], "root")
        if code == 127 or ("paddock-desktop" in err and "not found" in err):
            raise DesktopFailed(
                f"box {box.name} has no desktop: its image predates the desktop layer. "
                "Rebuild the image (`paddock image build`) and create a new box."
            )
        if code != 0:
            raise DesktopFailed(
                f"the desktop of box {box.name} did not start:\n{(out + err).strip()[-2000:]}"
            )

    async def screenshot(
        self, ref: str, size: tuple[int, int] | None = None, caller: User | None = None
    ) -> bytes:
        """A PNG of the desktop (started first if need be). The first one since the box
        (re)started waits until the desktop has drawn, not just until its X server
        answers: right after a resume that picture would be black."""
        box = await self._boxes.running(ref, caller)
        if self._drawn.get(box.id) != box.started_at:
            async with self._starting[box.id]:
                await self._start(box)  # idempotent; waits until drawn (bounded)
            self._drawn[box.id] = box.started_at
        try:
            return await self._with_vnc(box.id, lambda vnc: grab(vnc, size))
        except UnsafeSocket:
            raise
        except RfbError:
            # Not started yet (or its X server is restarting): start it, then once more.
            await self.ensure(box.id)
            return await self._with_vnc(box.id, lambda vnc: grab(vnc, size))

    async def session_env(self, ref: str, caller: User | None = None) -> dict[str, str]:
        await self.ensure(ref, caller=caller)
        return dict(SESSION_ENV)

    async def act(
        self,
        ref: str,
        action: str,
        x: int | None = None,
        y: int | None = None,
        button: int = 1,
        text: str | None = None,
        keys: str | None = None,
        caller: User | None = None,
    ) -> None:
        """Computer use: click at (x, y), type text, or press a key combination."""
        # The box first: to whoever may not see it, it is missing whatever they sent.
        ref = (await self._boxes.resolve(ref, caller)).id
        if action == "click":
            if x is None or y is None or x < 0 or y < 0:
                raise InvalidRequest("click needs x and y (pixels from the top left)")
            if button not in (1, 2, 3, 4, 5):
                raise InvalidRequest("button is 1 (left), 2 (middle), 3 (right), 4/5 (wheel)")
            # No --sync: it waits for a motion event, and there is none when the pointer is
            # already there (15-20 s). XTest queues the move before the click anyway.
            cmd = ["xdotool", "mousemove", str(x), str(y), "click", str(button)]
        elif action == "type":
            if not text or "\x00" in text:
                raise InvalidRequest("type needs some text")
            cmd = ["xdotool", "type", "--delay", "8", "--", text]
        elif action == "key":
            if not keys or not _KEY_RE.match(keys):
                raise InvalidRequest(
                    f"invalid key combination {keys!r}: e.g. Return, ctrl+s, alt+F4"
                )
            cmd = ["xdotool", "key", "--", *keys.split()]
        else:
            raise InvalidRequest(f"unknown desktop action {action!r}: use click, type or key")
        box = await self.ensure(ref)
        code, _, err = await self._boxes.run(box.id, cmd, env=SESSION_ENV)
        if code != 0:
            raise InvalidRequest(f"xdotool {action} failed: {err.strip()[-500:]}")

    async def link(
        self, ref: str, view_only: bool, size: tuple[int, int] | None, caller: User | None = None
    ) -> tuple[Box, str, Grant]:
        box = await self.ensure(ref, size, caller)
        grant = self._links.issue(box.id, self.link_ttl, view_only)
        return box, self._links.token(grant), grant

    async def bridge(self, ref: str, token: str) -> tuple[socket.socket, Grant]:
        """A connection to the box's VNC server for a browser holding this link, and what
        the link allows."""
        box = await self._boxes.resolve(ref)
        grant = self._links.verify(token, box.id)
        await self.ensure(box.id)
        return await anyio.to_thread.run_sync(self.connect, box.id), grant

    def check_link(self, box_id: str, token: str) -> Grant:
        return self._links.verify(token, box_id)
