"""The local terminal of `paddock shell` and `exec -t`, on Unix and on Windows.

`open_console()` puts the terminal in raw mode — every key, Ctrl-C included, goes to the
box, whose terminal does the echoing and line editing — and returns an object that reads
keys as bytes, reports size changes and restores the terminal's modes. It returns None
when stdin is no terminal (then stdin is read as a stream).

- Unix: termios raw mode; keys are stdin's bytes; SIGWINCH tells of a new size.
- Windows: the console's input mode loses line input, echo and Ctrl-C processing (so
  Ctrl-C arrives as \\x03) and gains virtual-terminal input, in which the console itself
  writes arrow and function keys as the escape sequences a Linux terminal sends; the
  output mode gains virtual-terminal processing so the box's escape sequences draw
  instead of printing. Keys are read with ReadConsoleW. A console that refuses
  virtual-terminal input (Windows before 10) is read with msvcrt.getwch, whose
  two-part codes for special keys are translated here. Windows has no SIGWINCH: the
  size is polled.

Nothing here is imported on the hot path, and termios, msvcrt and ctypes only load on
the platform that has them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import codecs
    from collections.abc import Callable
    from typing import Any

WINDOWS = os.name == "nt"

# kernel32's console API (consoleapi.h, processenv.h).
STD_INPUT_HANDLE = -10
STD_OUTPUT_HANDLE = -11
ENABLE_PROCESSED_INPUT = 0x0001  # Ctrl-C is a signal, not a key
ENABLE_LINE_INPUT = 0x0002
ENABLE_ECHO_INPUT = 0x0004
ENABLE_VIRTUAL_TERMINAL_INPUT = 0x0200
ENABLE_PROCESSED_OUTPUT = 0x0001
ENABLE_VIRTUAL_TERMINAL_PROCESSING = 0x0004
DISABLE_NEWLINE_AUTO_RETURN = 0x0008  # a line feed only moves down, as on a VT

# UTF-16 code units per ReadConsoleW call: a paste arrives in few messages.
_READ_UNITS = 4096
# How often Windows checks the console's size.
_SIZE_POLL_SECONDS = 0.25

# msvcrt.getwch's second code after a "\x00" or "\xe0" prefix, as xterm sends each key.
_SPECIAL_KEYS = {
    72: b"\x1b[A",  # up
    80: b"\x1b[B",  # down
    77: b"\x1b[C",  # right
    75: b"\x1b[D",  # left
    71: b"\x1b[H",  # home
    79: b"\x1b[F",  # end
    82: b"\x1b[2~",  # insert
    83: b"\x1b[3~",  # delete
    73: b"\x1b[5~",  # page up
    81: b"\x1b[6~",  # page down
    141: b"\x1b[1;5A",  # ctrl-up
    145: b"\x1b[1;5B",  # ctrl-down
    116: b"\x1b[1;5C",  # ctrl-right
    115: b"\x1b[1;5D",  # ctrl-left
    59: b"\x1bOP",  # F1..F4
    60: b"\x1bOQ",
    61: b"\x1bOR",
    62: b"\x1bOS",
    63: b"\x1b[15~",  # F5..F10
    64: b"\x1b[17~",
    65: b"\x1b[18~",
    66: b"\x1b[19~",
    67: b"\x1b[20~",
    68: b"\x1b[21~",
    133: b"\x1b[23~",  # F11, F12
    134: b"\x1b[24~",
}


def terminal_size() -> tuple[int, int]:
    """Columns and rows of the local terminal (80x24 when it cannot be told)."""
    import shutil

    size = shutil.get_terminal_size()
    return size.columns, size.lines


def open_console() -> PosixConsole | WindowsConsole | None:
    """The terminal on stdin, now in raw mode; None when stdin is not one."""
    console = WindowsConsole() if WINDOWS else PosixConsole()
    return console if console.enter_raw() else None


class PosixConsole:
    def __init__(self) -> None:
        self.fd = sys.stdin.fileno()
        self._saved: list[Any] | None = None

    def enter_raw(self) -> bool:
        try:
            import termios
            import tty
        except ImportError:
            return False
        try:
            self._saved = termios.tcgetattr(self.fd)
            tty.setraw(self.fd)
        except termios.error:
            return False
        return True

    def restore(self) -> None:
        import termios

        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self) -> bytes:
        return os.read(self.fd, 65536)

    def watch_size(self, resized: Callable[[int, int], None]) -> None:
        import signal

        if hasattr(signal, "SIGWINCH"):
            signal.signal(signal.SIGWINCH, lambda *_: resized(*terminal_size()))


def _kernel32() -> Any:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    # Declared, so 64-bit handles are not cut to a C int.
    dword, handle, p_dword = ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)
    kernel32.GetStdHandle.argtypes, kernel32.GetStdHandle.restype = [ctypes.c_int32], handle
    kernel32.GetConsoleMode.argtypes = [handle, p_dword]
    kernel32.SetConsoleMode.argtypes = [handle, dword]
    kernel32.ReadConsoleW.argtypes = [handle, ctypes.c_void_p, dword, p_dword, ctypes.c_void_p]
    return kernel32


def _msvcrt() -> Any:
    import importlib

    return importlib.import_module("msvcrt")


class WindowsConsole:
    def __init__(self) -> None:
        import codecs

        self._kernel32 = _kernel32()
        self._input: Any = None
        # (handle, mode) to put back, in the order they were changed.
        self._saved: list[tuple[Any, int]] = []
        self.vt_input = False
        # UTF-16 to text: a surrogate pair may straddle two reads.
        self._decoder: codecs.BufferedIncrementalDecoder = codecs.getincrementaldecoder(
            "utf-16-le"
        )("replace")
        self._watching = False

    def _mode(self, handle: Any) -> int | None:
        import ctypes

        mode = ctypes.c_uint32()
        if not self._kernel32.GetConsoleMode(handle, ctypes.pointer(mode)):
            return None  # not a console: redirected to a file, a pipe or NUL
        return mode.value

    def _set_first(self, handle: Any, saved: int, *modes: int) -> int | None:
        """Set the first of `modes` the console accepts; remember `saved` to restore."""
        for mode in modes:
            if self._kernel32.SetConsoleMode(handle, mode):
                self._saved.append((handle, saved))
                return mode
        return None

    def enter_raw(self) -> bool:
        self._input = self._kernel32.GetStdHandle(STD_INPUT_HANDLE)
        saved_in = self._mode(self._input)
        if saved_in is None:
            return False
        raw = saved_in & ~(ENABLE_PROCESSED_INPUT | ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT)
        vt = raw | ENABLE_VIRTUAL_TERMINAL_INPUT
        chosen = self._set_first(self._input, saved_in, vt, raw)
        if chosen is None:
            return False
        self.vt_input = chosen == vt
        output = self._kernel32.GetStdHandle(STD_OUTPUT_HANDLE)
        saved_out = self._mode(output)
        if saved_out is not None:  # output may be redirected while input is the console
            vt_out = saved_out | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING
            # Older consoles refuse DISABLE_NEWLINE_AUTO_RETURN; without VT processing at
            # all, escape sequences print as text but keys still work.
            self._set_first(output, saved_out, vt_out | DISABLE_NEWLINE_AUTO_RETURN, vt_out)
        return True

    def restore(self) -> None:
        self._watching = False
        while self._saved:
            handle, mode = self._saved.pop()
            self._kernel32.SetConsoleMode(handle, mode)

    def read(self) -> bytes:
        """The next keys as a Linux terminal sends them; b"" once the console fails."""
        while True:
            data = self._read_console() if self.vt_input else self._read_key()
            if data is None:
                return b""
            if data:  # b"": half a surrogate pair, or a key with no meaning here
                return data

    def _read_console(self) -> bytes | None:
        import ctypes

        units = (ctypes.c_uint16 * _READ_UNITS)()
        count = ctypes.c_uint32()
        if not self._kernel32.ReadConsoleW(
            self._input, units, _READ_UNITS, ctypes.pointer(count), None
        ):
            return None
        return self._decoder.decode(bytes(units)[: count.value * 2]).encode()

    def _read_key(self) -> bytes:
        msvcrt = _msvcrt()
        char = msvcrt.getwch()
        if char in ("\x00", "\xe0"):  # a special key: its code follows
            return _SPECIAL_KEYS.get(ord(msvcrt.getwch()), b"")
        if char == "\x08":
            # The legacy console reports Backspace as ^H; a Linux terminal sends DEL (so
            # Ctrl-H, the same code here, becomes DEL too).
            return b"\x7f"
        return self._decoder.decode(char.encode("utf-16-le", "surrogatepass")).encode()

    def watch_size(self, resized: Callable[[int, int], None]) -> None:
        import threading
        import time

        def poll() -> None:
            last = terminal_size()
            while self._watching:
                time.sleep(_SIZE_POLL_SECONDS)
                now = terminal_size()
                if now != last and self._watching:
                    last = now
                    resized(*now)

        self._watching = True
        threading.Thread(target=poll, daemon=True).start()
