"""The browser-to-box half of a view-only desktop bridge: passes what a viewer needs
(handshake, pixel format, encodings, update requests, fences) and drops input (keys,
pointer, clipboard, resizing). Xvnc has no per-connection view-only mode without VNC
passwords, so it is enforced here. A message it does not know ends the connection."""

from __future__ import annotations

import struct

_FIXED = {0: 20, 3: 10, 4: 8, 5: 6, 150: 10}
_DROPPED = {4, 5, 6, 251}


class ViewOnlyFilter:
    def __init__(self) -> None:
        self._buf = b""
        self._handshake = 12 + 1 + 1  # version, security type (None), ClientInit

    def feed(self, data: bytes) -> bytes:
        """Bytes to forward to the server; raises ValueError on an unknown message."""
        self._buf += data
        out = bytearray()
        if self._handshake:
            take = min(self._handshake, len(self._buf))
            out += self._buf[:take]
            self._buf = self._buf[take:]
            self._handshake -= take
        while self._buf:
            size = self._size(self._buf)
            if size is None or len(self._buf) < size:
                break
            message, self._buf = self._buf[:size], self._buf[size:]
            if message[0] not in _DROPPED:
                out += message
        return bytes(out)

    @staticmethod
    def _size(buf: bytes) -> int | None:
        """Length of the message at the head of buf, None when more bytes are needed."""
        kind = buf[0]
        if kind in _FIXED:
            return _FIXED[kind]
        header = {2: 4, 6: 8, 248: 9, 251: 8}.get(kind)
        if header is None:
            raise ValueError(f"unknown VNC client message {kind}")
        if len(buf) < header:
            return None
        if kind == 2:  # SetEncodings: u16 count of s32
            return 4 + 4 * int(struct.unpack("!H", buf[2:4])[0])
        if kind == 6:  # ClientCutText: u32 length
            return 8 + int(struct.unpack("!I", buf[4:8])[0])
        if kind == 248:  # ClientFence: u8 payload length
            return 9 + buf[8]
        return 8 + 16 * buf[6]  # SetDesktopSize: u8 screens of 16 bytes
