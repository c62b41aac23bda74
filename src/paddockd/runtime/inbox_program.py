"""The part of paddockd's in-box helper (runtime/inbox.py) that needs more than a shell: an
archive unpacked by `docker cp`'s rules. Run as `python3 -c PROGRAM DEST [SOCKET]` by the
box's own python3, the tar on stdin or, given SOCKET, read from paddockd's socket there
(runtime/feed.py). Where the box has no python3, plain GNU tar unpacks stdin instead.

GNU tar writes; this reads each member's header first and stops the unpacking before a
member that would put a file where a folder is, or a folder where anything else is (the
engine's noOverwriteDirNonDir). It runs as the box's root in every namespace of the box:
nothing it does reaches past the box, and what it prints is untrusted input to paddockd.

The exit codes below are every in-box operation's (runtime/inbox.py's shell uses them too).
"""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import subprocess
import sys
import tarfile
import threading

OK = 0
FAILED = 1
NOT_FOUND = 10
NOT_A_DIRECTORY = 11
IS_A_DIRECTORY = 12
CONFLICT = 13
PERMISSION = 14
EXISTS = 15
NO_SPACE = 16
BAD_ARCHIVE = 17
USAGE = 18
FOLDER = 19  # `put`: its folder could not be made
NO_PROGRAM = 20  # `put`/`copy` from a socket: no python3 in the box to read it
PLACE = 21  # `copy`: docker cp's rules give it no place (what is there says why)
NO_FOLDER = 22  # `copy`: the folder it would land in is missing

_BLOCK = 512
_PIECE = 1 << 20


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _read(stream: object, n: int) -> bytes:
    data = b""
    while len(data) < n:
        piece = stream.read(n - len(data))  # type: ignore[attr-defined]
        if not piece:
            raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
        data += piece
    return data


def _member(header: bytes) -> tuple[str, int, bytes, bool]:
    """A header block's name, size, type and whether it is a folder. A POSIX ustar header
    with the usual (unsigned) checksum, as Python, Go and the SDKs write, is read here in
    a few slices (tarfile's reading of every field was a third of a push's time in the box
    for a tree of small files); any other goes to tarfile, which refuses what is none."""
    if header[257:265] == b"ustar\x0000" and not header[124] & 0x80:
        try:
            stored = int(header[148:156].split(b"\0", 1)[0].strip() or b"0", 8)
            size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        except ValueError:
            stored = size = -1
        if stored == sum(header) - sum(header[148:156]) + 256 and size >= 0:
            kind = header[156:157]
            name = header[:100].split(b"\0", 1)[0]
            prefix = header[345:500].split(b"\0", 1)[0]
            if prefix and kind not in tarfile.GNU_TYPES:
                name = prefix + b"/" + name
            if kind == tarfile.AREGTYPE and name.endswith(b"/"):
                kind = tarfile.DIRTYPE  # an old (V7) tar's folder
            is_dir = kind == tarfile.DIRTYPE
            if is_dir:
                name = name.rstrip(b"/")
            return name.decode("utf-8", "surrogateescape"), size, kind, is_dir
    try:
        info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
    except tarfile.TarError as exc:
        raise Failure(BAD_ARCHIVE, f"not a tar archive ({exc})") from None
    return info.name, info.size, info.type, info.isdir()


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


def _source(feed: str | None) -> io.BufferedReader:
    # Reads of a MiB, not of 8 KiB: a tree of small files is thousands of headers.
    if feed is None:
        return io.BufferedReader(sys.stdin.buffer.raw, _PIECE)  # type: ignore[union-attr]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(feed)
    except OSError as exc:
        raise Failure(FAILED, f"cannot read the archive from paddockd ({exc})") from None
    return io.BufferedReader(socket.SocketIO(conn, "rb"), _PIECE)


def put(dest: str, feed: str | None = None) -> None:
    if not os.path.isdir(dest):
        raise Failure(NOT_A_DIRECTORY, f"{dest} is not a folder")
    tar = subprocess.Popen(
        ["tar", "-x", "-f", "-", "-p", "--same-owner", "--numeric-owner", "-C", dest],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=_PIECE,
    )
    assert tar.stdin is not None and tar.stderr is not None
    # Drained all along: tar blocks once a pipe it writes is full, and so would this.
    said = bytearray()
    drain = threading.Thread(target=_keep, args=(tar.stderr, said), daemon=True)
    drain.start()
    src = _source(feed)
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
            member, size, kind, is_dir = _member(header)
            padded = -(-size // _BLOCK) * _BLOCK
            if kind in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME):
                data = _read(src, padded)
                if kind == tarfile.XHDTYPE:
                    name = _pax_path(data[:size]) or name
                else:
                    name = data[:size].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                tar.stdin.write(header + data)
                continue
            if kind == tarfile.GNUTYPE_SPARSE:
                raise Failure(BAD_ARCHIVE, "sparse members are not taken; send them whole")
            if kind not in (tarfile.XGLTYPE, tarfile.GNUTYPE_LONGLINK):
                why = _conflict(dest, name or member, is_dir)
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


def main(argv: list[str]) -> int:
    try:
        if len(argv) not in (1, 2):
            raise Failure(USAGE, "usage: DEST [SOCKET] (the archive on stdin, or from SOCKET)")
        put(argv[0], argv[1] if len(argv) == 2 else None)
    except Failure as failure:
        sys.stderr.write(f"{failure}\n")
        return failure.code
    except OSError as exc:
        sys.stderr.write(f"{exc}\n")
        return FAILED
    return OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
