"""The engine's report of an exec that never started becomes one line and a shell's code."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator

import pytest

from paddockd.runtime.base import STDERR, STDOUT
from paddockd.runtime.exec_start import DIAGNOSE, StartChecked, diagnosis, start_failure

RUNC = "OCI runtime exec failed: exec failed: unable to start container process: "


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            RUNC + 'exec: "nosuch": executable file not found in $PATH: unknown',
            (127, "nosuch: command not found"),
        ),
        (
            RUNC + 'exec: "/no/x": stat /no/x: no such file or directory: unknown',
            (127, "/no/x: no such file or directory"),
        ),
        (RUNC + 'exec: "/tmp": permission denied: unknown', (126, "/tmp: permission denied")),
        (
            RUNC
            + 'chdir to cwd ("/nope") set in config.json failed: '
            + "no such file or directory: unknown",
            (126, "cannot use /nope as the working directory: no such file or directory"),
        ),
        (
            RUNC + 'chdir to cwd ("/etc/passwd") set in config.json failed: not a directory: '
            "unknown: Are you trying to mount a directory onto a file (or vice-versa)?",
            (126, "cannot use /etc/passwd as the working directory: not a directory"),
        ),
        (
            "unable to find user bob: no matching entries in passwd file\n",
            (126, "no user bob in the box"),
        ),
        (RUNC + "something new: unknown", (126, "something new")),
        ("hello from the command\n", None),
    ],
)
def test_start_failures(text: str, expected: tuple[int, str] | None) -> None:
    assert start_failure(text) == expected


class Proc:
    def __init__(self, chunks: list[bytes], code: int) -> None:
        self.chunks, self.code = chunks, code

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        for chunk in self.chunks:
            yield STDOUT, chunk

    async def wait(self) -> int:
        return self.code


async def gathered(proc: StartChecked) -> tuple[list[tuple[int, bytes]], int]:
    out = [item async for item in proc.output()]
    return out, await proc.wait()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_only_a_start_failure_is_rewritten(anyio_backend: str) -> None:
    failed = Proc([(RUNC + 'exec: "x": executable file not found in $PATH: unknown').encode()], 126)
    assert await gathered(StartChecked(failed)) == ([(STDERR, b"x: command not found\n")], 127)  # type: ignore[arg-type]
    # A command that prints such words and goes on, or exits otherwise, is left alone.
    chatty = Proc([b"unable to find user x: no matching entries in passwd file\n", b"more\n"], 126)
    assert (await gathered(StartChecked(chatty)))[0] == [(STDOUT, c) for c in chatty.chunks]  # type: ignore[arg-type]
    own = Proc([b"unable to find user x: no matching entries in passwd file\n"], 3)
    assert await gathered(StartChecked(own)) == ([(STDOUT, own.chunks[0])], 3)  # type: ignore[arg-type]


class Lost(Proc):
    """An exec as the engine leaves one whose report it lost: no output, 126, no pid (or a
    command of its own that exited 126 silently: a pid)."""

    def __init__(self, chunks: list[bytes], code: int, pid: int) -> None:
        super().__init__(chunks, code)
        self.pid = pid

    async def never_started(self) -> bool:
        return not self.pid


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_lost_report_is_found_out_in_the_box(anyio_backend: str) -> None:
    asked: list[int] = []

    async def diagnose() -> tuple[int, str] | None:
        asked.append(1)
        return 126, "no user bob in the box"

    checked = StartChecked(Lost([], 126, 0), diagnose)  # type: ignore[arg-type]
    assert await gathered(checked) == ([(STDERR, b"no user bob in the box\n")], 126)
    # A command that ran and exited 126 without a word is its own answer.
    assert await gathered(StartChecked(Lost([], 126, 4242), diagnose)) == ([], 126)  # type: ignore[arg-type]
    assert asked == [1]


@pytest.mark.parametrize(
    ("user", "workdir", "prog", "expected"),
    [
        ("nobodyx", "", "ls", (126, "no user nobodyx in the box")),
        ("nobodyx:nogroup", "", "ls", (126, "no user nobodyx in the box")),
        ("4242", "", "ls", None),  # a numeric uid needs no passwd entry
        (
            "root",
            "/nope",
            "ls",
            (126, "cannot use /nope as the working directory: no such file or directory"),
        ),
        (
            "",
            "/etc/passwd",
            "ls",
            (126, "cannot use /etc/passwd as the working directory: not a directory"),
        ),
        ("", "", "nosuchprog", (127, "nosuchprog: command not found")),
        ("", "", "/no/such/prog", (127, "/no/such/prog: no such file or directory")),
        ("", "", "/tmp", (126, "/tmp: permission denied")),
        ("", "/tmp", "ls", None),
    ],
)
def test_the_diagnosis_script_names_each_cause(
    user: str, workdir: str, prog: str, expected: tuple[int, str] | None
) -> None:
    # The script the box's own /bin/sh runs, run here by this machine's.
    done = subprocess.run(
        ["/bin/sh", "-c", DIAGNOSE, "sh", user, workdir, prog],
        capture_output=True,
        timeout=10,
        check=True,
    )
    assert (diagnosis(done.stdout) if done.stdout else None) == expected


@pytest.mark.parametrize(
    "output",
    [b"", b"0 fine", b"126", b"999 no", b"126 \x1b[2Jcleared", b"x" * 10_000],
)
def test_a_diagnosis_is_read_as_untrusted(output: bytes) -> None:
    assert diagnosis(output) is None
