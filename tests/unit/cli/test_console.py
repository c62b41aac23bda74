"""The terminal of `paddock shell` / `exec -t` (paddock.cli._console): Windows' console
on fakes of kernel32 and msvcrt (this machine has neither), Unix's in a real pty, each
end to end against paddockd's API on fakes: keys, Ctrl-C included, reach the box."""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from paddock import Client
from paddock.cli import _console
from paddock.cli.main import main
from paddockd.runtime.fake import FakeExec

from ..conftest import World, serve_api

pytestmark = pytest.mark.timeout(60)

SRC = Path(__file__).resolve().parents[3] / "src"
IN, OUT = 1001, 1002  # the fake console's handles
COOKED_IN = 0x01F7  # cmd.exe's usual input mode: processed, line, echo, quick edit...
COOKED_OUT = 0x0003  # processed output, wrap at end of line


class FakeKernel32:
    """The console API as kernel32 exposes it through ctypes (pointers, BOOL results)."""

    def __init__(self, console: bool = True) -> None:
        self.modes = {IN: COOKED_IN, OUT: COOKED_OUT} if console else {}
        self.refuse = {IN: 0, OUT: 0}  # mode bits this console does not know, per handle
        self.set_calls: list[tuple[int, int]] = []
        self.reads: list[list[int]] = []  # UTF-16 code units, one list per ReadConsoleW

    def GetStdHandle(self, which: int) -> int:
        return {-10: IN, -11: OUT}[which]

    def GetConsoleMode(self, handle: int, mode: Any) -> int:
        if handle not in self.modes:
            return 0
        mode.contents.value = self.modes[handle]
        return 1

    def SetConsoleMode(self, handle: int, mode: int) -> int:
        if mode & self.refuse[handle]:
            return 0
        self.set_calls.append((handle, mode))
        self.modes[handle] = mode
        return 1

    def ReadConsoleW(self, handle: int, buffer: Any, size: int, count: Any, _: None) -> int:
        assert handle == IN
        if not self.reads:
            return 0  # as when the console goes away
        units = self.reads.pop(0)
        assert len(units) <= size
        for i, unit in enumerate(units):
            buffer[i] = unit
        count.contents.value = len(units)
        return 1


class FakeMsvcrt:
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def getwch(self) -> str:
        return self.keys.pop(0)


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> FakeKernel32:
    kernel32 = FakeKernel32()
    monkeypatch.setattr(_console, "WINDOWS", True)
    monkeypatch.setattr(_console, "_kernel32", lambda: kernel32)
    return kernel32


def utf16(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def keys(console: Any) -> Iterator[bytes]:
    while data := console.read():
        yield data


# -- Windows, on fakes ---------------------------------------------------------------------


def test_windows_raw_mode_is_set_and_restored(windows: FakeKernel32) -> None:
    console = _console.open_console()
    assert isinstance(console, _console.WindowsConsole) and console.vt_input
    # No line input, echo or Ctrl-C processing; VT input. The other bits are kept.
    assert windows.modes[IN] == (COOKED_IN & ~0x7) | 0x0200
    # VT processing, and a line feed that does not return the carriage.
    assert windows.modes[OUT] == COOKED_OUT | 0x0004 | 0x0008
    console.restore()
    assert windows.modes == {IN: COOKED_IN, OUT: COOKED_OUT}
    assert windows.set_calls[-2:] == [(OUT, COOKED_OUT), (IN, COOKED_IN)]  # in reverse
    console.restore()  # twice: nothing more to do
    assert len(windows.set_calls) == 4


def test_windows_keys_arrive_as_a_linux_terminal_sends_them(windows: FakeKernel32) -> None:
    console = _console.open_console()
    assert console is not None
    windows.reads = [
        [0x03],  # Ctrl-C: a key like any other, not a signal
        utf16("ls -l\r"),
        utf16("\x1b[A\x1b[1;5D"),  # the console writes special keys as VT sequences
        utf16("\x7f\x1a\x04"),
        utf16("\U0001f600")[:1],  # a surrogate pair split over two reads
        utf16("\U0001f600")[1:] + utf16("é"),
    ]
    assert list(keys(console)) == [
        b"\x03",
        b"ls -l\r",
        b"\x1b[A\x1b[1;5D",
        b"\x7f\x1a\x04",
        "\U0001f600é".encode(),
    ]


def test_a_console_without_vt_input_is_read_key_by_key(
    windows: FakeKernel32, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows.refuse[IN] = 0x0200  # ENABLE_VIRTUAL_TERMINAL_INPUT: Windows before 10
    special = ["\xe0", "H", "\x00", ";", "\xe0", "s"]  # up, F1, ctrl-left
    msvcrt = FakeMsvcrt(
        ["\x03", "a", *special, "\x08", "\r", "\ud83d", "\ude00", "\xe0", chr(200), "z"]
    )
    monkeypatch.setattr(_console, "_msvcrt", lambda: msvcrt)
    console = _console.open_console()
    assert isinstance(console, _console.WindowsConsole) and not console.vt_input
    assert windows.modes[IN] == COOKED_IN & ~0x7
    got = [console.read() for _ in range(9)]
    assert got == [
        b"\x03",
        b"a",
        b"\x1b[A",  # up
        b"\x1bOP",  # F1
        b"\x1b[1;5D",  # ctrl-left
        b"\x7f",  # backspace, as DEL
        b"\r",
        "\U0001f600".encode(),
        b"z",  # an unknown special key is dropped
    ]
    console.restore()
    assert windows.modes == {IN: COOKED_IN, OUT: COOKED_OUT}


@pytest.mark.parametrize(
    ("refuse", "out_mode"),
    [(0x0008, COOKED_OUT | 0x0004), (0x0004, COOKED_OUT)],
    ids=["no DISABLE_NEWLINE_AUTO_RETURN", "no VT processing"],
)
def test_an_older_console_keeps_what_it_can(
    refuse: int, out_mode: int, windows: FakeKernel32
) -> None:
    windows.refuse[OUT] = refuse
    console = _console.open_console()
    assert console is not None
    assert windows.modes[OUT] == out_mode
    console.restore()
    assert windows.modes == {IN: COOKED_IN, OUT: COOKED_OUT}


def test_input_that_is_no_console_is_left_alone(
    windows: FakeKernel32, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_console = FakeKernel32(console=False)
    monkeypatch.setattr(_console, "_kernel32", lambda: no_console)
    assert _console.open_console() is None
    assert no_console.set_calls == []


def test_output_that_is_no_console_still_gives_raw_keys(windows: FakeKernel32) -> None:
    del windows.modes[OUT]  # `paddock shell > log`
    console = _console.open_console()
    assert console is not None and windows.set_calls == [(IN, (COOKED_IN & ~0x7) | 0x0200)]
    console.restore()
    assert windows.modes == {IN: COOKED_IN}


def test_windows_polls_the_size(windows: FakeKernel32, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = iter([(80, 24), (80, 24), (120, 40)])
    monkeypatch.setattr(_console, "terminal_size", lambda: next(sizes, (120, 40)))
    monkeypatch.setattr(_console, "_SIZE_POLL_SECONDS", 0.01)
    console = _console.open_console()
    assert console is not None
    resized: list[tuple[int, int]] = []
    console.watch_size(lambda cols, rows: resized.append((cols, rows)))
    deadline = time.monotonic() + 5
    while not resized and time.monotonic() < deadline:
        time.sleep(0.01)
    console.restore()
    time.sleep(0.05)
    assert resized == [(120, 40)]


# -- end to end: the box gets the keys -----------------------------------------------------


@pytest.fixture
def box_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake box's command waits for Ctrl-C on its stdin, then prints what it got."""

    async def output(self: FakeExec) -> AsyncIterator[tuple[int, bytes]]:
        for _ in range(500):
            if b"\x03" in self.stdin:
                break
            await asyncio.sleep(0.01)
        yield 1, b"got " + repr(self.stdin).encode()

    monkeypatch.setattr(FakeExec, "output", output)


def terminal_of(world: World) -> tuple[bool, list[str]]:
    """Whether the last exec had a terminal, and the size it was given (columns, rows:
    the server sizes it inside the box, before the command)."""
    spec = world.runtime.execs[-1]
    return spec.tty, spec.cmd[4:6]


class ConsoleStdin:
    """sys.stdin at a Windows console: a terminal whose keys come from ReadConsoleW."""

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise AssertionError("a console's keys are not read from its file descriptor")


def test_exec_t_on_windows_sends_ctrl_c_to_the_box(
    world: World,
    windows: FakeKernel32,
    box_reads_stdin: None,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
) -> None:
    with serve_api(world) as port:
        url = f"http://127.0.0.1:{port}"
        with Client(url, token=world.token) as c:
            c.create_box(name="b")
        for name, value in [("PADDOCK_URL", url), ("PADDOCK_TOKEN", world.token),
                            ("PADDOCK_CONFIG", str(tmp_path / "cli.json")),
                            ("COLUMNS", "111"), ("LINES", "33")]:  # fmt: skip
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sys, "stdin", ConsoleStdin())
        windows.reads = [utf16("hi\r"), [0x03]]
        code = main(["exec", "-t", "b", "--", "cat"])
    assert (code, capsysbinary.readouterr().out) == (0, b"got b'hi\\r\\x03'")
    assert terminal_of(world) == (True, ["111", "33"])
    assert windows.modes == {IN: COOKED_IN, OUT: COOKED_OUT}


def test_exec_t_on_unix_sends_ctrl_c_to_the_box(
    world: World, box_reads_stdin: None, tmp_path: Path
) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    before = termios.tcgetattr(slave)
    with serve_api(world) as port:
        url = f"http://127.0.0.1:{port}"
        with Client(url, token=world.token) as c:
            c.create_box(name="b")
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["PYTHONPATH"] = str(SRC)
        env["PADDOCK_URL"], env["PADDOCK_TOKEN"] = url, world.token
        env["PADDOCK_CONFIG"] = str(tmp_path / "cli.json")
        proc = subprocess.Popen(
            [sys.executable, "-m", "paddock.cli.main", "exec", "-t", "b", "--", "cat"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        # Once raw mode is on (no ISIG), Ctrl-C is a byte for the box, not a signal.
        deadline = time.monotonic() + 20
        while termios.tcgetattr(slave)[3] & termios.ISIG:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.write(master, b"hi\r\x03")
        code = proc.wait(timeout=20)
        out = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    assert code == 0, out
    assert b"got b'hi\\r\\x03'" in out
    assert terminal_of(world) == (True, ["111", "33"])
    assert termios.tcgetattr(slave) == before  # the terminal is back as it was
    os.close(slave)
    os.close(master)


def test_ctypes_pointers_are_what_the_fakes_fill() -> None:
    """The fakes write through `.contents`, as kernel32 writes through the pointer."""
    value = ctypes.c_uint32()
    FakeKernel32().GetConsoleMode(IN, ctypes.pointer(value))
    assert value.value == COOKED_IN
