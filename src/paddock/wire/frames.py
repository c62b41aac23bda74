"""Framing of streamed exec output: one byte of kind, four bytes of length, the payload.

Used by both sides of the wire (HTTP streaming bodies and WebSocket messages), so stdout
and stderr stay apart and binary output needs no escaping.
"""

from __future__ import annotations

import json
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

MEDIA_TYPE = "application/vnd.paddock.frames"
STDOUT = 1
STDERR = 2
EXIT = 3  # payload: {"exit_code": int}
ERROR = 4  # payload: {"error": {"code", "message"}}

_HEADER = struct.Struct(">BI")


def encode(kind: int, payload: bytes) -> bytes:
    return _HEADER.pack(kind, len(payload)) + payload


def encode_json(kind: int, obj: Any) -> bytes:
    return encode(kind, json.dumps(obj).encode())


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, it yields whole frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        self._buf += data
        while len(self._buf) >= _HEADER.size:
            kind, size = _HEADER.unpack_from(self._buf)
            end = _HEADER.size + size
            if len(self._buf) < end:
                return
            payload = bytes(self._buf[_HEADER.size : end])
            del self._buf[:end]
            yield kind, payload

    @property
    def pending(self) -> int:
        return len(self._buf)
