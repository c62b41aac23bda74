"""A minimal RFB 3.8 client for the box's Xvnc unix socket: enough to read the whole
framebuffer (Raw encoding: the socket is local, so bytes are cheaper than decoding) and to
resize the desktop (ExtendedDesktopSize). Synchronous; callers run it in a thread.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from ..domain.errors import DesktopFailed

RAW = 0
EXTENDED_DESKTOP_SIZE = -308
# 32 bpp, depth 24, little-endian, true colour, 8 bits a channel: pixels arrive as B,G,R,X.
PIXEL_FORMAT = struct.pack("!BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
# Paddock's own limits on a desktop (services/desktop.py) and on what it reads to skip.
MAX_WIDTH, MAX_HEIGHT = 3840, 2160
MAX_SKIP = 1 << 20
# A server that keeps answering with nothing new must not hold a thread for ever.
FRAME_SECONDS = 15.0


class RfbError(DesktopFailed):
    pass


@dataclass(frozen=True)
class Frame:
    width: int
    height: int
    bgrx: bytes  # width * height * 4


class RfbClient:
    """Speaks to a VNC server the box runs: every size it announces is bounded before
    anything is allocated or read, since the box controls the other end."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        try:
            self._handshake()
        except OSError as exc:
            self._sock.close()
            raise RfbError(f"cannot talk to the desktop's VNC server: {exc}") from exc
        except RfbError:
            self._sock.close()
            raise
        self._screen: tuple[int, int] | None = None  # (id, flags) once the server said
        self._fb = bytearray()

    def __enter__(self) -> RfbClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise RfbError("the desktop's VNC server closed the connection")
            buf += chunk
        return bytes(buf)

    def _skip(self, n: int) -> None:
        if n > MAX_SKIP:
            raise RfbError(f"the VNC server sent an oversized message ({n} bytes)")
        self._read(n)

    @staticmethod
    def _bounded(width: int, height: int) -> tuple[int, int]:
        if not (0 < width <= MAX_WIDTH and 0 < height <= MAX_HEIGHT):
            raise RfbError(f"the VNC server claims a {width}x{height} desktop")
        return width, height

    def _handshake(self) -> None:
        if not self._read(12).startswith(b"RFB 003."):
            raise RfbError("not a VNC server")
        self._sock.sendall(b"RFB 003.008\n")
        (count,) = self._read(1)
        types = self._read(count) if count else b""
        if 1 not in types:  # None: the socket's permissions are the authentication
            raise RfbError(f"the VNC server asks for authentication ({list(types)})")
        self._sock.sendall(b"\x01")
        if struct.unpack("!I", self._read(4))[0] != 0:
            raise RfbError("the VNC server refused the connection")
        self._sock.sendall(b"\x01")  # shared: the browser may be watching too
        self.width, self.height = self._bounded(*struct.unpack("!HH", self._read(4)))
        self._read(16)
        (name_len,) = struct.unpack("!I", self._read(4))
        self._skip(name_len)
        self._sock.sendall(b"\x00\x00\x00\x00" + PIXEL_FORMAT)
        encodings = (RAW, EXTENDED_DESKTOP_SIZE)
        self._sock.sendall(struct.pack(f"!BxH{len(encodings)}i", 2, len(encodings), *encodings))

    def _request(self, incremental: bool = False) -> None:
        self._sock.sendall(struct.pack("!BBHHHH", 3, incremental, 0, 0, self.width, self.height))

    def _update(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """Read server messages up to one framebuffer update, painting its pixels into the
        client's copy of the framebuffer; returns the pixel area it carried and its
        ExtendedDesktopSize rectangles (reason, status, w, h)."""
        while True:
            (kind,) = self._read(1)
            if kind == 0:
                break
            if kind == 2:  # bell
                continue
            if kind == 3:  # server cut text
                _, length = struct.unpack("!3sI", self._read(7))
                self._skip(length)
                continue
            raise RfbError(f"unexpected VNC message {kind}")
        (rects,) = struct.unpack("!xH", self._read(3))
        area = 0
        sizes = []
        for _ in range(rects):
            x, y, w, h, encoding = struct.unpack("!HHHHi", self._read(12))
            if encoding == EXTENDED_DESKTOP_SIZE:
                (screens,) = struct.unpack("!B3x", self._read(4))
                layout = self._read(16 * screens)
                if screens:
                    sid, _, _, _, _, flags = struct.unpack("!IHHHHI", layout[:16])
                    self._screen = (sid, flags)
                self.width, self.height = self._bounded(w, h)
                sizes.append((x, y, w, h))
            elif encoding == RAW:
                if x + w > self.width or y + h > self.height:
                    raise RfbError("the VNC server sent pixels outside the desktop")
                data = self._read(w * h * 4)
                if len(self._fb) != self.width * self.height * 4:
                    self._fb = bytearray(self.width * self.height * 4)
                stride, row_bytes = self.width * 4, w * 4
                for row in range(h):
                    start = (y + row) * stride + x * 4
                    self._fb[start : start + row_bytes] = data[
                        row * row_bytes : (row + 1) * row_bytes
                    ]
                area += w * h
            else:
                raise RfbError(f"unexpected VNC encoding {encoding}")
        return area, sizes

    def frame(self) -> Frame:
        """The whole framebuffer, as it is now."""
        # A full request is first answered with the desktop's size only (ExtendedDesktopSize);
        # the pixels it marked for sending follow on the next (incremental) requests.
        self._request()
        covered = 0
        deadline = time.monotonic() + FRAME_SECONDS
        while covered < self.width * self.height:
            if time.monotonic() > deadline:
                raise RfbError("the VNC server did not send a whole frame in time")
            area, sizes = self._update()
            covered = 0 if sizes else covered + area
            if covered < self.width * self.height:
                self._request(incremental=True)
        return Frame(self.width, self.height, bytes(self._fb))

    def resize(self, width: int, height: int) -> None:
        """Ask for a new desktop size (what a browser does when its window changes)."""
        if (width, height) == (self.width, self.height):
            return
        if self._screen is None:
            # A full update answers at once and carries the server's screen layout.
            self._request()
            self._update()
        sid, flags = self._screen or (0, 0)
        self._sock.sendall(
            struct.pack("!BxHHBxIHHHHI", 251, width, height, 1, sid, 0, 0, width, height, flags)
        )
        for _ in range(20):
            # The answer comes as a framebuffer update, so one must be asked for.
            self._request(incremental=True)
            _, sizes = self._update()
            for reason, status, _, _ in sizes:
                if reason == 1 and status != 0:
                    raise RfbError(f"the desktop refused the size {width}x{height} ({status})")
                if reason == 1:
                    return
        raise RfbError("the desktop did not confirm the new size")
