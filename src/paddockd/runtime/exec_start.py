"""An exec the engine could not start (no such program, working directory or user),
reported as one line and the shell's exit codes instead of runc's text.

The engine reports such a failure as the exec's output — runc's error, e.g.
`OCI runtime exec failed: exec failed: unable to start container process: exec: "x":
executable file not found in $PATH: unknown` — and exit code 126 (moby's
daemon/exec.go). Nothing of the command ran, so that text is the whole output.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from .base import STDERR, ExecProcess, ExecWrapper

NOT_RUNNABLE = 126  # as a shell: found, but cannot be run
NOT_FOUND = 127  # as a shell: command not found

# What the engine's text starts with when it could not start the command at all.
_PREFIXES = (b"OCI runtime exec failed", b"unable to find user ")
_RUNC = "OCI runtime exec failed: exec failed: unable to start container process: "
# (pattern, exit code, message); the first that matches wins.
_KNOWN = (
    (r'exec: "(.*)": executable file not found in \$PATH', NOT_FOUND, "{0}: command not found"),
    (
        r'exec: "(.*)": stat .*: no such file or directory',
        NOT_FOUND,
        "{0}: no such file or directory",
    ),
    (r'exec: "(.*)": permission denied', NOT_RUNNABLE, "{0}: permission denied"),
    (
        r'chdir to cwd \("(.*)"\) set in config\.json failed: ([a-z ]+)',
        NOT_RUNNABLE,
        "cannot use {0} as the working directory: {1}",
    ),
    (
        r"unable to find user (.*): no matching entries in passwd file",
        NOT_RUNNABLE,
        "no user {0} in the box",
    ),
)


def start_failure(text: str) -> tuple[int, str] | None:
    """(exit code, one line) for the engine's report of an exec that never started."""
    text = text.strip()
    if not text.encode().startswith(_PREFIXES):
        return None
    for pattern, code, message in _KNOWN:
        if found := re.search(pattern, text):
            return code, message.format(*found.groups())
    # Another runc refusal: its own words, without the layers of prefixes.
    return NOT_RUNNABLE, text.removeprefix(_RUNC).removesuffix(": unknown")


class StartChecked(ExecWrapper):
    """An `ExecProcess` whose start failure, if it has one, reads as a shell's would:
    `x: command not found` on stderr and 127."""

    def __init__(self, proc: ExecProcess) -> None:
        super().__init__(proc)
        self._code: int | None = None

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        held: tuple[int, bytes] | None = None
        first = True
        async for kind, data in self._proc.output():
            if first and data.startswith(_PREFIXES):
                held = (kind, data)  # the engine's report, or a command's first words
            elif held is not None:
                yield held
                held = None
                yield kind, data
            else:
                yield kind, data
            first = False
        if held is None:
            return
        failure = start_failure(held[1].decode(errors="replace"))
        if failure is None or await self._proc.wait() != NOT_RUNNABLE:
            yield held
            return
        self._code, message = failure
        yield STDERR, (message + "\n").encode()

    async def wait(self) -> int:
        return self._code if self._code is not None else await self._proc.wait()
