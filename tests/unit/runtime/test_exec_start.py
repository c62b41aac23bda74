"""The engine's report of an exec that never started becomes one line and a shell's code."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from paddockd.runtime.base import STDERR, STDOUT
from paddockd.runtime.exec_start import StartChecked, start_failure

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
