"""Run nftables scripts in-process through libnftables (what the `nft` command is built on).

A DNS answer for an allowlisted name must be admitted before the answer reaches the box,
so every millisecond here is added to the box's first connection: a fork+exec of `nft`
costs ~5 ms, a library call well under one. Falls back to the command when the library is
missing. Callers run this in a worker thread; one lock, because a context is not
thread-safe.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import threading
from typing import Any

from ..domain.errors import PaddockError

_OUTPUT_JSON = 1 << 4


class Nft:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._ctx: int | None = None
        name = ctypes.util.find_library("nftables") or "libnftables.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            return
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        for fn in ("nft_ctx_buffer_output", "nft_ctx_buffer_error"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p]
        for fn in ("nft_ctx_get_output_buffer", "nft_ctx_get_error_buffer"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p]
            getattr(lib, fn).restype = ctypes.c_char_p
        ctx = lib.nft_ctx_new(0)
        lib.nft_ctx_buffer_output(ctx)
        lib.nft_ctx_buffer_error(ctx)
        self._lib, self._ctx = lib, ctx

    def run(self, script: str, *, as_json: bool = False) -> str:
        """Run a script atomically; returns its output. Raises PaddockError when refused."""
        if self._lib is None:
            return self._run_command(script, as_json)
        lib = self._lib
        with self._lock:
            lib.nft_ctx_output_set_flags(self._ctx, _OUTPUT_JSON if as_json else 0)
            rc = lib.nft_run_cmd_from_buffer(self._ctx, script.encode())
            out = (lib.nft_ctx_get_output_buffer(self._ctx) or b"").decode()
            err = (lib.nft_ctx_get_error_buffer(self._ctx) or b"").decode()
        if rc != 0:
            raise PaddockError(f"nft refused Paddock's rules: {err.strip()}")
        return out

    def list_json(self, command: str) -> list[dict[str, Any]]:
        """`list ...` as parsed JSON objects; [] when the object does not exist."""
        try:
            out = self.run(command, as_json=True)
        except PaddockError:
            return []
        rows: list[dict[str, Any]] = json.loads(out or "{}").get("nftables", [])
        return rows

    @staticmethod
    def _run_command(script: str, as_json: bool) -> str:
        argv = ["nft", *(["-j"] if as_json else []), "-f", "-"]
        done = subprocess.run(argv, input=script, capture_output=True, text=True)
        if done.returncode != 0:
            raise PaddockError(f"nft refused Paddock's rules: {done.stderr.strip()}")
        return done.stdout
