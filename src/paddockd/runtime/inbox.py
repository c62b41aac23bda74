"""File transfers done inside a running box, by runtime/inbox_program.py over exec.

What the program prints is the box's to choose: every read here is bounded (a stat line,
an error text), and its exit codes are read through the one table the program defines.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ..domain.errors import InvalidRequest, InvalidState, NotFound, PaddockError
from . import inbox_program as codes
from .base import STDOUT, ExecProcess, ExecSpec

PROGRAM = Path(codes.__file__).read_text()
MAX_LINE = 64 * 1024
MAX_ERROR = 16 * 1024
_DIR_NON_DIR = re.compile(r'cannot overwrite (non-)?directory "([^"]*)"')

Exec = Callable[[ExecSpec], Awaitable[ExecProcess]]

# The program's commands for a box without python3 (a template may drop it): coreutils and
# GNU tar, the same exit codes, a stat as `S size mode(hex) mtime uid gid [link target]`.
_SHELL = r"""
st() {
  [ -e "$1" ] || [ -L "$1" ] || { echo "$1: No such file or directory" >&2; exit 10; }
  t=""; [ -L "$1" ] && t=$(readlink -f -- "$1")
  printf 'S %s %s\n' "$(stat -c '%s %f %Y %u %g' -- "$1")" "$t"
}
case $1 in
stat) st "$2" ;;
get) st "$2"
  exec tar -c -f - --numeric-owner --sort=name -C "$(dirname -- "$2")" -- "$(basename -- "$2")" ;;
put) [ -d "$2" ] || { echo "$2 is not a folder" >&2; exit 11; }
  cd "$2" && exec tar -x -f - -p --same-owner --numeric-owner ;;
write) d=$(dirname -- "$2")
  [ -d "$d" ] || { mkdir -p -- "$d" && chown "$3:$4" -- "$d"; } || exit 1
  [ -d "$2" ] && { echo "$2 is a folder" >&2; exit 12; }
  new=; [ -e "$2" ] || new=1
  cat > "$2" || exit 1
  [ -z "$new" ] || chown "$3:$4" -- "$2"
  st "$2" ;;
*) echo "unknown command $1" >&2; exit 18 ;;
esac
"""
# python3 where the box has it, else the shell's version; chosen in the box, so a command
# whose input streams in is never sent twice.
_DISPATCH = (
    'if command -v python3 >/dev/null 2>&1; then exec python3 -c "$PADDOCK_INBOX" "$@"; fi\n'
    + _SHELL
)


def spec(command: str, *args: str, stdin: bool = False) -> ExecSpec:
    # The program travels in the environment: as $0 the shell would print it whole with
    # any error of its own.
    env = {"PADDOCK_INBOX": PROGRAM}
    return ExecSpec(
        # /bin/sh, not the first `sh` on the box's PATH (which the box may have put there).
        ["/bin/sh", "-c", _DISPATCH, "paddock", command, *args],
        env,
        "/",
        "root",
        stdin=stdin,
    )


def failure(code: int, said: str, path: str) -> PaddockError:
    """What the program's exit `code` and error text mean, as Paddock's error."""
    said = said.strip()
    if code == codes.NOT_FOUND:
        return NotFound(f"no such file or directory in the box: {path}")
    if code == codes.CONFLICT and (found := _DIR_NON_DIR.search(said)):
        is_file, where = found.groups()
        there, other = ("a file", "a folder") if is_file else ("a folder", "a file")
        return InvalidRequest(
            f"{where} in the box is {there}: {other} cannot replace it (remove it first)"
        )
    if code == codes.NOT_A_DIRECTORY:
        return InvalidRequest(f"{path} in the box is not a folder")
    if code == codes.IS_A_DIRECTORY:
        return InvalidRequest(f"{path} in the box is a folder, not a file")
    if code == codes.BAD_ARCHIVE:
        return InvalidRequest(f"the request body is not a valid tar archive ({said})")
    if code == codes.NO_SPACE:
        return InvalidState(
            "the box's disk is full: free space in it (`paddock exec BOX -- rm ...`) or "
            "snapshot it, and try again"
        )
    if code == codes.PERMISSION:
        return InvalidRequest(f"permission denied in the box: {said}")
    if "No space left on device" in said or "Disk quota exceeded" in said:
        return failure(codes.NO_SPACE, said, path)
    return PaddockError(f"the file transfer in the box failed ({code}): {said[:500]}")


async def _errors(proc: ExecProcess, out: list[bytes]) -> str:
    """Drain the process's output: stdout kept (up to MAX_LINE), stderr's text returned."""
    err = bytearray()
    held = 0
    async for kind, data in proc.output():
        if kind == STDOUT:
            held += len(data)
            if held <= MAX_LINE:
                out.append(data)
        elif len(err) < MAX_ERROR:
            err += data[: MAX_ERROR - len(err)]
    return err.decode(errors="replace")


async def put(run: Exec, dest: str, chunks: AsyncIterator[bytes]) -> None:
    await _fed(run, spec("put", dest, stdin=True), chunks, dest)


async def write(
    run: Exec, path: str, owner: tuple[int, int], chunks: AsyncIterator[bytes]
) -> dict[str, Any]:
    """`chunks` as the file `path` in the box; its stat once written."""
    line = await _fed(
        run, spec("write", path, str(owner[0]), str(owner[1]), stdin=True), chunks, path
    )
    return _stat(line, path)


async def _fed(run: Exec, command: ExecSpec, chunks: AsyncIterator[bytes], path: str) -> bytes:
    """Run `command` with `chunks` on its stdin; what it printed (bounded) once it ends well."""
    proc = await run(command)
    try:
        said: list[str] = []
        async with anyio.create_task_group() as tg:
            out: list[bytes] = []

            async def drain() -> None:
                said.append(await _errors(proc, out))

            tg.start_soon(drain)
            try:
                async for chunk in chunks:
                    await proc.write(chunk)
            except PaddockError:
                pass  # the program stopped reading: its exit code says why
            finally:
                await proc.close_stdin()
        code = await proc.wait()
        if code != 0:
            raise failure(code, said[0] if said else "", path)
        return b"".join(out)
    finally:
        await proc.close()


def _stat(line: bytes, path: str) -> dict[str, Any]:
    if line.startswith(b"S "):
        return _shell_stat(line, path)
    try:
        data = json.loads(line)
    except ValueError:
        raise PaddockError(f"the box answered a stat of {path} with something else") from None
    if not isinstance(data, dict):
        raise PaddockError(f"the box answered a stat of {path} with something else")
    return data


def _shell_stat(line: bytes, path: str) -> dict[str, Any]:
    fields = line.decode(errors="replace").rstrip("\n").split(" ", 6)
    try:
        size, mode, mtime, uid, gid = fields[1:6]
        return {
            "name": posixpath.basename(path.rstrip("/")) or "/",
            "size": int(size),
            "mode": codes.go_mode(int(mode, 16)),
            "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(mtime))),
            "linkTarget": fields[6] if len(fields) > 6 else "",
            "uid": int(uid),
            "gid": int(gid),
        }
    except (ValueError, IndexError):
        raise PaddockError(f"the box answered a stat of {path} with something else") from None


async def stat(run: Exec, path: str) -> dict[str, Any] | None:
    proc = await run(spec("stat", path))
    try:
        out: list[bytes] = []
        said = await _errors(proc, out)
        code = await proc.wait()
    finally:
        await proc.close()
    if code in (codes.NOT_FOUND, codes.NOT_A_DIRECTORY):
        return None
    if code != 0:
        raise failure(code, said, path)
    return _stat(b"".join(out), path)


async def get(run: Exec, path: str) -> tuple[AsyncIterator[bytes], dict[str, Any]]:
    """A tar of `path` from the box, and its stat (the program's first line)."""
    proc = await run(spec("get", path))
    output = proc.output()
    line = bytearray()
    err = bytearray()
    try:
        async for kind, data in output:
            if kind != STDOUT:
                err += data[: MAX_ERROR - len(err)]
                continue
            line += data
            if b"\n" in line or len(line) > MAX_LINE:
                break
        if b"\n" not in line:
            code = await proc.wait()
            raise failure(code or codes.FAILED, err.decode(errors="replace"), path)
    except BaseException:
        await proc.close()
        raise
    first, _, rest = bytes(line).partition(b"\n")
    st = _stat(first, path)

    async def chunks() -> AsyncIterator[bytes]:
        said = bytearray()
        try:
            if rest:
                yield rest
            async for kind, data in output:
                if kind == STDOUT:
                    yield data
                elif len(said) < MAX_ERROR:
                    said += data[: MAX_ERROR - len(said)]
            code = await proc.wait()
            if code != 0:
                raise failure(code, said.decode(errors="replace"), path)
        finally:
            with contextlib.suppress(PaddockError, OSError):
                await proc.close()

    return chunks(), st
