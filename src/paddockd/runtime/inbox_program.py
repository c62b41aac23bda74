"""The program paddockd runs inside a box for file transfers (runtime/inbox.py sends it).

It runs as the box's root, with the box's own python3 and GNU tar, in every namespace of
the box: nothing it does reaches past the box, and what it prints is untrusted input to
paddockd (read there with bounds). It exists because the engine's archive API unpacks as
the engine's one remap of box ids, which a box with an identity of its own
(runtime/identity.py) does not use; and so that file transfers follow `docker cp`'s
rules the same way on every runtime.

    put DEST   unpack the tar on stdin into the folder DEST (GNU tar does the writing);
               a member that would put a file where a folder is, or a folder where
               anything else is, stops it first (the engine's noOverwriteDirNonDir)
    get PATH   one JSON line (PATH's stat, as `stat`), then a tar of PATH on stdout
    stat PATH  one JSON line: name, size, mode (Go's os.FileMode bits, as the engine's
               stat gives them), mtime, linkTarget (resolved in the box), uid, gid
    write PATH UID GID
               stdin becomes the file PATH (made 0644 and UID:GID's if new, emptied and
               rewritten if not; a link is followed, as envd does); folders on the way
               are made, UID:GID's; one JSON line back: the file's stat

A box without python3 gets the same commands from a shell script with coreutils and GNU
tar (runtime/inbox.py), with the same exit codes, a stat as an `S ...` line, and plain
tar's rules for what replaces what.

Exit codes (one table for every in-box operation; runtime/inbox.py reads them back):
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tarfile
import threading
import time

OK = 0
FAILED = 1
NOT_FOUND = 10
NOT_A_DIRECTORY = 11
IS_A_DIRECTORY = 12
CONFLICT = 13
PERMISSION = 14
NO_SPACE = 16
BAD_ARCHIVE = 17
USAGE = 18

_BLOCK = 512
_PIECE = 1 << 20
# Go's os.FileMode type bits, as the engine's stat reports a path.
_GO_DIR = 1 << 31
_GO_SYMLINK = 1 << 27
_GO_DEVICE = 1 << 26
_GO_PIPE = 1 << 25
_GO_SOCKET = 1 << 24
_GO_SETUID = 1 << 23
_GO_SETGID = 1 << 22
_GO_CHAR = 1 << 21
_GO_STICKY = 1 << 20


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def go_mode(st_mode: int) -> int:
    """A stat's st_mode as Go's os.FileMode bits."""
    mode = st_mode & 0o777
    kind = stat.S_IFMT(st_mode)
    mode |= {
        stat.S_IFDIR: _GO_DIR,
        stat.S_IFLNK: _GO_SYMLINK,
        stat.S_IFIFO: _GO_PIPE,
        stat.S_IFSOCK: _GO_SOCKET,
        stat.S_IFBLK: _GO_DEVICE,
        stat.S_IFCHR: _GO_DEVICE | _GO_CHAR,
    }.get(kind, 0)
    if st_mode & stat.S_ISUID:
        mode |= _GO_SETUID
    if st_mode & stat.S_ISGID:
        mode |= _GO_SETGID
    if st_mode & stat.S_ISVTX:
        mode |= _GO_STICKY
    return mode


def _failure(exc: OSError, path: str) -> Failure:
    import errno

    code = {
        errno.ENOENT: NOT_FOUND,
        errno.ENOTDIR: NOT_A_DIRECTORY,
        errno.EISDIR: IS_A_DIRECTORY,
        errno.EACCES: PERMISSION,
        errno.EPERM: PERMISSION,
        errno.ENOSPC: NO_SPACE,
        errno.EDQUOT: NO_SPACE,
    }.get(exc.errno or 0, FAILED)
    return Failure(code, f"{path}: {exc.strerror}")


def describe(path: str) -> dict[str, object]:
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise _failure(exc, path) from None
    mtime = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(st.st_mtime))
    return {
        "name": os.path.basename(path.rstrip("/")) or "/",
        "size": st.st_size,
        "mode": go_mode(st.st_mode),
        "mtime": f"{mtime}.{int(st.st_mtime_ns % 10**9):09d}Z",
        "linkTarget": os.path.realpath(path) if stat.S_ISLNK(st.st_mode) else "",
        "uid": st.st_uid,
        "gid": st.st_gid,
    }


def _line(data: dict[str, object]) -> None:
    os.write(1, (json.dumps(data) + "\n").encode())


def get(path: str) -> None:
    _line(describe(path))
    parent, base = os.path.split(path.rstrip("/")) if path != "/" else ("/", ".")
    # In name order, as the engine's archive was: a reader meets links in a known order.
    os.execvp(
        "tar",
        ["tar", "-c", "-f", "-", "--numeric-owner", "--sort=name", "-C", parent or "/", "--", base],
    )


def _read(stream: object, n: int) -> bytes:
    data = b""
    while len(data) < n:
        piece = stream.read(n - len(data))  # type: ignore[attr-defined]
        if not piece:
            raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
        data += piece
    return data


def _pax_path(data: bytes) -> str | None:
    found = None
    while data:
        length = data.partition(b" ")[0]
        if not length.isdigit() or int(length) <= 0:
            raise Failure(BAD_ARCHIVE, "a broken extended header")
        record, data = data[: int(length)], data[int(length) :]
        key, _, value = record.partition(b" ")[2].rstrip(b"\n").partition(b"=")
        if key == b"path":
            found = value.decode("utf-8", "surrogateescape")
    return found


def _conflict(dest: str, name: str, is_dir: bool) -> str | None:
    target = os.path.normpath(os.path.join(dest, name.lstrip("/")))
    try:
        st = os.lstat(target)
    except OSError:
        return None
    there = stat.S_ISDIR(st.st_mode)
    if there and not is_dir:
        return f"cannot overwrite directory {json.dumps(target)} with non-directory"
    if not there and is_dir:
        return f"cannot overwrite non-directory {json.dumps(target)} with directory"
    return None


def put(dest: str) -> None:
    if not os.path.isdir(dest):
        raise Failure(NOT_A_DIRECTORY, f"{dest} is not a folder")
    tar = subprocess.Popen(
        ["tar", "-x", "-f", "-", "-p", "--same-owner", "--numeric-owner", "-C", dest],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tar.stdin is not None and tar.stderr is not None
    # Drained all along: tar blocks once a pipe it writes is full, and so would this.
    said = bytearray()
    drain = threading.Thread(target=_keep, args=(tar.stderr, said), daemon=True)
    drain.start()
    src = sys.stdin.buffer
    name: str | None = None
    try:
        while True:
            header = src.read(_BLOCK)
            if not header:
                break
            if len(header) < _BLOCK:
                header += _read(src, _BLOCK - len(header))
            if header == bytes(_BLOCK):
                tar.stdin.write(header)
                continue
            try:
                info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
            except tarfile.TarError as exc:
                raise Failure(BAD_ARCHIVE, f"not a tar archive ({exc})") from None
            padded = -(-info.size // _BLOCK) * _BLOCK
            if info.type in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME):
                data = _read(src, padded)
                if info.type == tarfile.XHDTYPE:
                    name = _pax_path(data[: info.size]) or name
                else:
                    name = data[: info.size].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                tar.stdin.write(header + data)
                continue
            if info.type == tarfile.GNUTYPE_SPARSE:
                raise Failure(BAD_ARCHIVE, "sparse members are not taken; send them whole")
            if info.type not in (tarfile.XGLTYPE, tarfile.GNUTYPE_LONGLINK):
                why = _conflict(dest, name or info.name, info.isdir())
                if why:
                    raise Failure(CONFLICT, why)
                name = None
            tar.stdin.write(header)
            left = padded
            while left:
                piece = src.read(min(left, _PIECE))
                if not piece:
                    raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
                tar.stdin.write(piece)
                left -= len(piece)
        tar.stdin.close()
    except BrokenPipeError:
        pass  # tar stopped reading: what it said is below
    except BaseException:
        tar.kill()
        tar.wait()
        raise
    code = tar.wait()
    drain.join()
    text = said.decode("utf-8", "replace")
    if code != 0:
        if "No space left" in text or "Disk quota" in text:
            raise Failure(NO_SPACE, text.strip())
        if "does not look like a tar archive" in text or "Unexpected EOF" in text:
            raise Failure(BAD_ARCHIVE, text.strip())
        raise Failure(FAILED, text.strip() or "tar failed")


def _keep(stream: object, said: bytearray) -> None:
    while piece := stream.read(4096):  # type: ignore[attr-defined]
        if len(said) < 1 << 16:
            said += piece


def _folders(path: str, uid: int, gid: int) -> None:
    made = ""
    for part in path.split("/")[:-1]:
        if not part:
            continue
        made += "/" + part
        try:
            os.mkdir(made, 0o755)
        except FileExistsError:
            continue
        os.chown(made, uid, gid)


def write(path: str, uid: int, gid: int) -> None:
    try:
        _folders(path, uid, gid)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.fchown(fd, uid, gid)
    except FileExistsError:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        except OSError as exc:
            raise _failure(exc, path) from None
    except OSError as exc:
        raise _failure(exc, path) from None
    src = sys.stdin.buffer
    try:
        while piece := src.read(_PIECE):
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except OSError as exc:
        raise _failure(exc, path) from None
    finally:
        os.close(fd)
    _line(describe(path))


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 4 and argv[0] == "write":
            write(argv[1], int(argv[2]), int(argv[3]))
            return OK
        if len(argv) != 2:
            raise Failure(USAGE, "usage: put DEST | get PATH | stat PATH | write PATH UID GID")
        command, path = argv
        if command == "put":
            put(path)
        elif command == "get":
            get(path)
        elif command == "stat":
            _line(describe(path))
        else:
            raise Failure(USAGE, f"unknown command {command!r}")
    except Failure as failure:
        sys.stderr.write(f"{failure}\n")
        return failure.code
    except OSError as exc:
        sys.stderr.write(f"{exc}\n")
        return FAILED
    return OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
