"""Everything paddockd does inside a running box's filesystem, in one place: a shell script
of the box's own coreutils, findutils and GNU tar (and its python3, where it has one, to
unpack by `docker cp`'s rules: runtime/inbox_program.py), run over exec as whoever the
caller names, with one table of exit codes.

Why inside: the engine's archive API unpacks as the engine's one remap of box ids, which a
box with an identity of its own (runtime/identity.py) does not use; and so the same
operations behave the same on every runtime. What the box prints is the box's to choose:
every read here is bounded (a record, an error text), and its exit codes are read through
the table. Records are the fields `RECORD` names, each ended by a NUL (the one byte no
name holds).

    stat PATH                one record (a link itself), then its resolved path
    list PATH DEPTH LIMIT    a record per entry, DEPTH levels down, LIMIT at most
    mkdirs PATH UID GID NEW  PATH and the folders on the way, new ones UID:GID's (UID ""
                             for the caller's); NEW=1: PATH may not exist yet
    move SRC DEST            rename, making DEST's folders
    remove PATH              a folder with all it holds; a link itself
    get PATH                 `stat PATH`, then a tar of PATH (links as links, by name)
    put DEST UID GID [FEED]  the tar on stdin (or from the socket FEED: runtime/feed.py)
                             unpacked into the folder DEST, made first (new folders
                             UID:GID's)
    copy DEST UID GID KIND NAME [FEED]
                             the tar placed at DEST by docker cp's rules (KIND file or dir:
                             one SRC, NAME on top; into: into the folder DEST, made when
                             missing); then the path it landed at
    write PATH UID GID       stdin as the file PATH (new: 0644, UID:GID's, and its
                             folders); then `stat PATH`
    signal NAME SIG          SIG to the process `noted` as NAME and all it started (its
                             process group too, when it leads one), as root
    trust NAME               the PEM certificate on stdin trusted by the box's TLS
                             clients: kept as NAME.crt among the local CAs and added to
                             the system bundle once

And the prefixes of commands paddockd starts in a box: `noted` (the command's pid kept
under a name, for `signal`), `detached` (started in a session of its own, its output
in a log, the exec done once it started) and `ssh_session` (one SSH session's sshd).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Literal

import anyio

from ..domain.errors import Conflict, InvalidRequest, InvalidState, NotFound, PaddockError
from ..domain.ssh import SSH_DIR
from . import inbox_program as codes
from .base import STDOUT, ExecProcess, ExecSpec, FileInfo, FileKind, Placement
from .feed import Feed

PROGRAM = Path(codes.__file__).read_text()
MAX_ERROR = 16 * 1024
MAX_RECORD = 3 * 4096 + 1024  # a path and a link target of 4096 bytes each, names, numbers
# find's -printf: own type, what a link leads to, size, symbolic mode, octal mode, owner
# and group names, mtime, link target, path, uid, gid.
RECORD = r"%y\0%Y\0%s\0%M\0%m\0%u\0%g\0%T@\0%l\0%p\0%U\0%G\0"
FIELDS = 12
_KINDS: dict[str, FileKind] = {"f": "file", "d": "dir", "l": "symlink"}
_DIR_NON_DIR = re.compile(r'cannot overwrite (non-)?directory "([^"]*)"')
_SHELL = r"""
F='@RECORD@'
there() { [ -e "$1" ] || [ -L "$1" ] || {
  echo "$1: No such file or directory" >&2; exit @NOT_FOUND@; }; }
one() { there "$1"; find "$1" -maxdepth 0 -printf "$F" || exit 1
  [ -L "$1" ] && readlink -f -- "$1" | tr -d '\n'; printf '\0'; }
folders() {  # PATH UID GID: PATH and the folders on the way, new ones UID:GID's
  set -f; p=""; IFS=/
  for c in $1; do
    [ -z "$c" ] && continue; p="$p/$c"
    [ -e "$p" ] && continue
    mkdir -- "$p" || exit 1
    [ -z "$2" ] || chown "$2:$3" -- "$p" || exit 1
  done
  unset IFS; set +f
  [ -d "$1" ] || { echo "$1 is not a folder" >&2; exit @NOT_A_DIRECTORY@; }
}
unpack() {  # FOLDER [FEED]: the tar unpacked into FOLDER, read from FEED or else stdin
  if command -v python3 >/dev/null 2>&1; then
    python3 -I -S -c "$PADDOCK_INBOX" "$1" ${2:+"$2"}; return; fi
  [ -z "$2" ] || return @NO_PROGRAM@
  (cd "$1" && exec tar -x -f - -p --same-owner --numeric-owner)
}
case $1 in
stat) one "$2" ;;
list) there "$2"; [ -d "$2" ] || { echo "$2 is not a folder" >&2; exit @NOT_A_DIRECTORY@; }
  [ -r "$2" ] && [ -x "$2" ] || { echo "$2: Permission denied" >&2; exit @PERMISSION@; }
  find "$2" -mindepth 1 -maxdepth "$3" -printf "$F" 2>/dev/null | head -z -n "$(($4 * @FIELDS@))"
  exit 0 ;;
mkdirs) if [ "$5" = 1 ] && { [ -e "$2" ] || [ -L "$2" ]; }; then
    echo "$2 exists already" >&2; exit @EXISTS@; fi
  folders "$2" "$3" "$4" ;;
move) there "$2"; mkdir -p -- "$(dirname -- "$3")" && exec mv -T -- "$2" "$3" ;;
remove) there "$2"; exec rm -rf -- "$2" ;;
get) one "$2"
  exec tar -c -f - --numeric-owner --sort=name -C "$(dirname -- "$2")" -- "$(basename -- "$2")" ;;
put) (folders "$2" "$3" "$4") || exit @FOLDER@
  unpack "$2" "$5" ;;
copy) [ -z "$7" ] || command -v python3 >/dev/null 2>&1 || exit @NO_PROGRAM@
  t=$2; while [ "$t" != / ] && [ "${t%/}" != "$t" ]; do t=${t%/}; done
  p=$(dirname -- "$t"); b=$(basename -- "$t"); at=$p; as=$b
  if [ -d "$2" ]; then at=$t; as=
  elif [ -e "$t" ]; then
    case $5 in
    dir) echo "cannot copy the folder $6 onto the file $t in the box" >&2; exit @PLACE@ ;;
    into) echo "$t in the box is a file; a folder's contents or several sources need a folder" >&2
      exit @PLACE@ ;;
    esac
    [ "$t" = "$2" ] || { echo "$2 in the box is not a folder" >&2; exit @PLACE@; }
  else
    if [ "$t" != "$2" ] && [ "$5" = file ]; then
      echo "no such folder in the box: $2 (DEST ends in /)" >&2; exit @NO_FOLDER@; fi
    if [ ! -d "$p" ]; then
      [ -e "$p" ] && { echo "$p in the box is not a folder" >&2; exit @PLACE@; }
      echo "no such folder in the box: $p" >&2; exit @NO_FOLDER@
    fi
    if [ "$5" = into ]; then mkdir -- "$t" && chown "$3:$4" -- "$t" || exit 1; at=$t; as=; fi
  fi
  if [ -z "$as" ] || [ "$as" = "$6" ]; then
    unpack "$at" "$7" || exit
  else  # SRC lands under another name: unpacked aside, then moved into place whole
    aside=$(mktemp -d "${at%/}/.paddock-copy-XXXXXX") || exit 1
    unpack "$aside" "$7" || { c=$?; rm -rf -- "$aside"; exit $c; }
    mv -T -- "$aside/$6" "${at%/}/$as" || { rm -rf -- "$aside"; exit 1; }
    rmdir -- "$aside"
  fi
  if [ "$5" = into ]; then printf '%s\0' "$at"; else printf '%s\0' "${at%/}/${as:-$6}"; fi ;;
signal) read -r p < "/tmp/.paddock-proc-$2" 2>/dev/null || exit 0
  case "$p" in *[!0-9]*|"") exit 0 ;; esac
  tree() { for c in $(ps -o pid= --ppid "$1"); do tree "$c"; done; echo "$1"; }
  group=$(ps -o pgid= -p "$p" | tr -d ' ')
  kill "-$3" $(tree "$p") 2>/dev/null
  [ "$group" = "$p" ] && kill "-$3" "-$p" 2>/dev/null
  exit 0 ;;
write) folders "$(dirname -- "$2")" "$3" "$4"
  [ -d "$2" ] && { echo "$2 is a folder" >&2; exit @IS_A_DIRECTORY@; }
  new=; [ -e "$2" ] || new=1
  cat > "$2" || exit 1
  [ -z "$new" ] || chown "$3:$4" -- "$2" || exit 1
  one "$2" ;;
trust) c="/usr/local/share/ca-certificates/$2.crt"; b=/etc/ssl/certs/ca-certificates.crt
  mkdir -p -- "${c%/*}" && cat > "$c" || exit 1
  line=$(sed -n 2p "$c")
  if [ -f "$b" ] && ! grep -qxF -- "$line" "$b"; then cat "$c" >> "$b" || exit 1; fi
  exit 0 ;;
*) echo "unknown command $1" >&2; exit @USAGE@ ;;
esac
"""
SCRIPT = _SHELL.replace("@RECORD@", RECORD).replace("@FIELDS@", str(FIELDS))
for _name in re.findall(r"@([A-Z_]+)@", SCRIPT):
    SCRIPT = SCRIPT.replace(f"@{_name}@", str(getattr(codes, _name)))

Exec = Callable[[ExecSpec], Awaitable[ExecProcess]]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
SIGNALS = ("TERM", "KILL", "INT", "HUP")


def _named(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a process name: {name!r}")
    return name


def noted(name: str, argv: list[str], prepare: str = "") -> list[str]:
    """`argv` run with its pid noted as `name` (for `signal`); `prepare`, shell lines run
    first in the same process (an agent's set-up)."""
    script = f'echo $$ > "/tmp/.paddock-proc-$0"; {prepare or ":"}\nexec "$@"'
    return ["/bin/sh", "-c", script, _named(name), *argv]


def started(argv: list[str]) -> list[str]:
    """`argv` started in the background in a session of its own (no hangup when the exec
    ends), stdin from /dev/null, its output in a new log file; prints `PID LOG`. `$!` is its
    pid: a background job of a non-interactive shell leads no process group, so setsid
    makes the session without forking again."""
    script = (
        'command -v "$1" >/dev/null || { echo "$1: command not found" >&2; exit 127; }; '
        "log=$(mktemp /tmp/paddock-exec-XXXXXX.log) || exit 126; "
        'setsid "$@" >"$log" 2>&1 </dev/null & echo "$! $log"'
    )
    return ["/bin/sh", "-c", script, "paddock", *argv]


def detached(argv: list[str], log: str) -> list[str]:
    """`argv` started in a session of its own, its output appended to `log` in the box; the
    command returns once it started (127 at once when there is no such program)."""
    script = (
        'command -v "$1" >/dev/null || { echo "$1: command not found" >&2; exit 127; }; '
        'l=$0; setsid -f "$@" >>"$l" 2>&1 </dev/null'
    )
    return ["/bin/sh", "-c", script, log, *argv]


def ssh_session(config: str, keys: str, host_key: str) -> list[str]:
    """One SSH session: its sshd's settings, the caller's keys and the box's host key
    written where `config` says (a folder root's alone, as sshd's StrictModes wants), then
    OpenSSH's `sshd -i` speaking SSH on the exec's stdin and stdout (its errors on stderr).
    Run as root."""
    d = SSH_DIR
    script = (
        f"umask 022; mkdir -p /run/sshd {d} && chmod 0755 /run/sshd /run/paddock {d} || exit 1\n"
        f'printf %s "$1" > {d}/sshd_config && printf %s "$2" > {d}/authorized_keys || exit 1\n'
        f'(umask 077; printf %s "$3" > {d}/host_key) || exit 1\n'
        "[ -x /usr/sbin/sshd ] || { echo 'this box has no OpenSSH server: it was made from an "
        "older box image (paddock image build, then a new box)' >&2; exit 127; }\n"
        f"exec /usr/sbin/sshd -i -e -f {d}/sshd_config"
    )
    return ["/bin/sh", "-c", script, "paddock-ssh", config, keys, host_key]


def spec(command: str, *args: str, user: str = "root", stdin: bool = False) -> ExecSpec:
    # /bin/sh, not the first `sh` on the box's PATH (which the box may have put there). The
    # python part travels in the environment: as $0 the shell would print it with errors.
    argv = ["/bin/sh", "-c", SCRIPT, "paddock", command, *args]
    return ExecSpec(argv, {"PADDOCK_INBOX": PROGRAM}, "/", user, stdin=stdin)


def failure(code: int, said: str, path: str) -> PaddockError:
    """What an exit `code` and error text mean, as Paddock's error."""
    said = said.strip()
    full = code == codes.NO_SPACE or "No space left on device" in said or "Disk quota" in said
    if code == codes.PLACE:
        return InvalidRequest(said[:500])
    if code == codes.NO_FOLDER:
        return NotFound(said[:500])
    if code == codes.FOLDER and not full:
        return InvalidRequest(f"cannot use {path} in the box as a folder: {said[:300]}")
    if code == codes.NOT_FOUND:
        return NotFound(f"no such file or directory in the box: {path}")
    if code == codes.CONFLICT and (found := _DIR_NON_DIR.search(said)):
        is_file, where = found.groups()
        with contextlib.suppress(ValueError):  # a JSON string (inbox_program._quoted)
            where = str(json.loads(f'"{where}"'))
        there, other = ("a file", "a folder") if is_file else ("a folder", "a file")
        return InvalidRequest(
            f"{where} in the box is {there}: {other} cannot replace it (remove it first)"
        )
    if code == codes.EXISTS:
        return Conflict(f"{path} exists already in the box")
    if code == codes.NOT_A_DIRECTORY or "Not a directory" in said:
        return InvalidRequest(f"{path} in the box is not a folder (or a part of it is not)")
    if code == codes.IS_A_DIRECTORY:
        return InvalidRequest(f"{path} in the box is a folder, not a file")
    if code == codes.BAD_ARCHIVE:
        return InvalidRequest(f"the request body is not a valid tar archive ({said})")
    if full:
        return InvalidState(
            "the box's disk is full: free space in it (`paddock exec BOX -- rm ...`) or "
            "snapshot it, and try again"
        )
    if code == codes.PERMISSION or "Permission denied" in said:
        return InvalidRequest(f"permission denied in the box: {said[:300] or path}")
    return PaddockError(f"the operation in the box failed ({code}): {said[:500]}")


def parse(fields: list[bytes], resolved: bytes = b"") -> FileInfo | None:
    """One record as a FileInfo; None for one that makes no sense (the box's find is the
    box's: what it prints is checked, never trusted)."""
    own, leads, size, _, mode, owner, group, mtime, link, path, uid, gid = (
        f.decode("utf-8", "surrogateescape") for f in fields
    )
    if not path.startswith("/"):
        return None
    kind = _KINDS.get(own, "other")
    try:
        info = FileInfo(
            path=path,
            kind=kind,
            size=max(int(size), 0),
            mode=int(mode, 8) & 0o7777,
            mtime=float(mtime),
            uid=int(uid),
            gid=int(gid),
            owner=owner,
            group=group,
        )
    except ValueError:
        return None
    if kind != "symlink":
        return info
    lead: FileKind | Literal["missing"] = _KINDS.get(leads, "missing")
    resolved_text = resolved.decode("utf-8", "surrogateescape")
    return FileInfo(**{**info.__dict__, "link": link, "leads_to": lead, "resolved": resolved_text})


def records(out: bytes) -> list[FileInfo]:
    fields = out.split(b"\0")
    found = []
    for i in range(0, len(fields) - FIELDS + 1, FIELDS):
        if (info := parse(fields[i : i + FIELDS])) is not None:
            found.append(info)
    return found


async def _gathered(proc: ExecProcess, limit: int) -> tuple[bytes, str, bool]:
    """(stdout up to `limit`, stderr's text, whether stdout went past the limit)."""
    out, err = bytearray(), bytearray()
    async for kind, data in proc.output():
        if kind == STDOUT:
            out += data
            if len(out) > limit:
                return bytes(out[:limit]), err.decode(errors="replace"), True
        elif len(err) < MAX_ERROR:
            err += data[: MAX_ERROR - len(err)]
    return bytes(out), err.decode(errors="replace"), False


async def run(
    run_: Exec, command: str, *args: str, user: str = "root", limit: int = MAX_RECORD
) -> bytes:
    """Run a command that takes no input; its output (bounded), or its error raised."""
    proc = await run_(spec(command, *args, user=user))
    try:
        out, err, over = await _gathered(proc, limit)
        if over:
            await proc.kill()
            return out
        code = await proc.wait()
    finally:
        await proc.close()
    if code != 0:
        raise failure(code, err, args[0] if args else "")
    return out


def _one(out: bytes, path: str) -> FileInfo:
    fields = out.split(b"\0")
    info = parse(fields[:FIELDS], fields[FIELDS] if len(fields) > FIELDS else b"")
    if len(fields) <= FIELDS or info is None:
        raise PaddockError(f"the box answered a stat of {path} with something else")
    return info


async def signal(run_: Exec, name: str, sig: str) -> None:
    if sig not in SIGNALS:
        raise ValueError(f"not a signal paddockd sends: {sig!r}")
    await run(run_, "signal", _named(name), sig)


async def trust(run_: Exec, name: str, pem: bytes) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield pem

    await _fed(run_, spec("trust", _named(name), stdin=True), chunks(), name)


async def stat(run_: Exec, path: str, user: str = "root") -> FileInfo | None:
    try:
        return _one(await run(run_, "stat", path, user=user), path)
    except NotFound:
        return None
    except InvalidRequest as exc:
        if "not a folder" in exc.message:
            return None  # a part of the path is a file: nothing there
        raise


async def listing(
    run_: Exec, path: str, depth: int, limit: int, user: str = "root"
) -> list[FileInfo]:
    out = await run(run_, "list", path, str(depth), str(limit), user=user, limit=limit * MAX_RECORD)
    return records(out)[:limit]


async def put(
    run_: Exec,
    dest: str,
    owner: tuple[int, int],
    chunks: AsyncIterator[bytes],
    feed: Feed | None = None,
) -> None:
    """The tar `chunks` unpacked into the folder `dest`, made first with the folders on
    the way (new ones `owner`'s): one exec for both."""
    await _unpacked(run_, ("put", dest, str(owner[0]), str(owner[1])), chunks, feed, dest)


async def copy(
    run_: Exec,
    dest: str,
    owner: tuple[int, int],
    place: Placement,
    chunks: AsyncIterator[bytes],
    feed: Feed | None = None,
) -> str:
    """The tar `chunks` placed at `dest` by docker cp's rules, decided in the box in the
    same exec; the path it landed at."""
    args = ("copy", dest, str(owner[0]), str(owner[1]), place.kind, place.name)
    out = await _unpacked(run_, args, chunks, feed, dest)
    landed, ended, _ = out.partition(b"\0")
    if not ended or not landed.startswith(b"/"):
        raise PaddockError(f"the box answered a copy to {dest} with something else")
    return landed.decode(errors="replace")  # the box's to say: never an unencodable answer


async def _unpacked(
    run_: Exec,
    args: tuple[str, ...],
    chunks: AsyncIterator[bytes],
    feed: Feed | None,
    path: str,
) -> bytes:
    """Run the unpacking command `args`, its tar over `feed` when given (and the box has a
    python3 to read it), else on the exec's stdin; what it printed once it ends well."""
    if feed is not None:
        try:
            command = spec(*args, feed.box_path)
            code, out, err = await _feeding(run_, command, _over(feed, chunks))
        finally:
            feed.close()
        # No python3 in the box: said before it connected, so no chunk was taken.
        if code != codes.NO_PROGRAM:
            if code != 0:
                raise failure(code, err, path)
            return out
    return await _fed(run_, spec(*args, stdin=True), chunks, path)


async def write(
    run_: Exec, path: str, owner: tuple[int, int], chunks: AsyncIterator[bytes]
) -> FileInfo:
    """`chunks` as the file `path` in the box."""
    command = spec("write", path, str(owner[0]), str(owner[1]), stdin=True)
    return _one(await _fed(run_, command, chunks, path), path)


async def _fed(run_: Exec, command: ExecSpec, chunks: AsyncIterator[bytes], path: str) -> bytes:
    """Run `command` with `chunks` on its stdin; what it printed (bounded) once it ends well."""
    code, out, err = await _feeding(run_, command, _on_stdin(chunks))
    if code != 0:
        raise failure(code, err, path)
    return out


Sender = Callable[[ExecProcess, anyio.Event], Awaitable[None]]


async def _feeding(run_: Exec, command: ExecSpec, send: Sender) -> tuple[int, bytes, str]:
    """Run `command` while `send` gives it its input (told by an event when the program's
    output has ended); its exit code, what it printed (bounded) and its error text."""
    proc = await run_(command)
    try:
        said: list[tuple[bytes, str, bool]] = []
        ended = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def drain() -> None:
                said.append(await _gathered(proc, MAX_RECORD))
                ended.set()

            tg.start_soon(drain)
            await send(proc, ended)
        code = await proc.wait()
        out, err, _ = said[0] if said else (b"", "", False)
        return code, out, err
    finally:
        await proc.close()


def _on_stdin(chunks: AsyncIterator[bytes]) -> Sender:
    async def send(proc: ExecProcess, ended: anyio.Event) -> None:
        try:
            async for chunk in chunks:
                await proc.write(chunk)
        except PaddockError:
            pass  # the program stopped reading: its exit code says why
        finally:
            await proc.close_stdin()

    return send


def _over(feed: Feed, chunks: AsyncIterator[bytes]) -> Sender:
    async def send(proc: ExecProcess, ended: anyio.Event) -> None:
        async with anyio.create_task_group() as tg:

            async def stop() -> None:
                await ended.wait()  # ended: it will not connect now, nor read more
                tg.cancel_scope.cancel()

            tg.start_soon(stop)
            try:
                conn = await feed.accept()
            except OSError:
                await proc.kill()  # it did not connect in time: its exit code says why
            else:
                await feed.send(conn, chunks)
            tg.cancel_scope.cancel()

    return send


async def get(run_: Exec, path: str) -> tuple[AsyncIterator[bytes], FileInfo]:
    """A tar of `path` from the box, and what `path` is (the record before it)."""
    proc = await run_(spec("get", path))
    output = proc.output()
    head = bytearray()
    err = bytearray()
    try:
        async for kind, data in output:
            if kind != STDOUT:
                err += data[: MAX_ERROR - len(err)]
                continue
            head += data
            if head.count(b"\0") > FIELDS or len(head) > MAX_RECORD:
                break
        if head.count(b"\0") <= FIELDS:
            code = await proc.wait()
            raise failure(code or codes.FAILED, err.decode(errors="replace"), path)
    except BaseException:
        await proc.close()
        raise
    cut = 0
    for _ in range(FIELDS + 1):
        cut = head.index(b"\0", cut) + 1
    info = _one(bytes(head[:cut]), path)
    rest = bytes(head[cut:])

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

    return chunks(), info
