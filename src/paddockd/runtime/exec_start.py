"""An exec the engine could not start (no such program, working directory or user),
reported as one line and the shell's exit codes instead of runc's text.

The engine reports such a failure as the exec's output — runc's error, e.g.
`OCI runtime exec failed: exec failed: unable to start container process: exec: "x":
executable file not found in $PATH: unknown` — and exit code 126 (moby's
daemon/exec.go). Nothing of the command ran, so that text is the whole output.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

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


# Why an exec did not start, found out in the box when the engine lost its own report:
# `CODE message`, or nothing when none of these is the cause. Run as root, with the
# exec's environment (so its PATH). The box can change any program here: what it prints
# is read as untrusted (see `diagnosis`).
DIAGNOSE = r"""
user=$1 dir=$2 prog=$3
name=${user%%:*}
case $name in
  ""|*[!0-9]*) [ -z "$name" ] || id -u -- "$name" >/dev/null 2>&1 ||
    { echo "126 no user $name in the box"; exit 0; } ;;
esac
cwd="126 cannot use $dir as the working directory"
if [ -n "$dir" ]; then
  [ -e "$dir" ] || { echo "$cwd: no such file or directory"; exit 0; }
  [ -d "$dir" ] || { echo "$cwd: not a directory"; exit 0; }
fi
case $prog in
  */*) [ -e "$prog" ] || { echo "127 $prog: no such file or directory"; exit 0; }
       [ -f "$prog" ] && [ -x "$prog" ] || { echo "126 $prog: permission denied"; exit 0; } ;;
  *) command -v -- "$prog" >/dev/null 2>&1 || { echo "127 $prog: command not found"; exit 0; } ;;
esac
"""
_DIAGNOSIS_MAX = 512


def diagnosis(output: bytes) -> tuple[int, str] | None:
    """DIAGNOSE's answer, bounded and checked: one line, a shell's code, printable words."""
    line = output[:_DIAGNOSIS_MAX].decode(errors="replace").split("\n", 1)[0]
    code, _, message = line.partition(" ")
    if code not in ("126", "127") or not message or not message.isprintable():
        return None
    return int(code), message


class Startable(ExecProcess, Protocol):
    async def never_started(self) -> bool:
        """Whether the engine never started the process (it has no pid)."""
        ...


class StartChecked(ExecWrapper):
    """An `ExecProcess` whose start failure, if it has one, reads as a shell's would:
    `x: command not found` on stderr and 127.

    Under load the engine often loses its own report: the stream ends empty, with 126
    and no pid. Nothing of the command ran; `diagnose` then finds out why in the box."""

    def __init__(
        self,
        proc: Startable,
        diagnose: Callable[[], Awaitable[tuple[int, str] | None]] | None = None,
    ) -> None:
        super().__init__(proc)
        self._startable = proc
        self._diagnose = diagnose
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
        if held is not None:
            failure = start_failure(held[1].decode(errors="replace"))
            if failure is None or await self._proc.wait() != NOT_RUNNABLE:
                yield held
                return
        elif not (first and await self._report_lost()):
            return
        else:
            assert self._diagnose is not None
            failure = await self._diagnose()
            if failure is None:
                return
        self._code, message = failure
        yield STDERR, (message + "\n").encode()

    async def _report_lost(self) -> bool:
        return (
            self._diagnose is not None
            and await self._proc.wait() == NOT_RUNNABLE
            and await self._startable.never_started()
        )

    async def wait(self) -> int:
        return self._code if self._code is not None else await self._proc.wait()
