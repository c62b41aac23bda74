"""The part of paddockd's in-box helper (runtime/inbox.py) that needs more than a shell: an
archive unpacked by `docker cp`'s rules. Run as `python3 -I -S -c PROGRAM DEST [SOCKET]` by the
box's own python3, the tar on stdin or, given SOCKET, read from paddockd's socket there
(runtime/feed.py). Where the box has no python3, plain GNU tar unpacks stdin instead.

GNU tar writes; this reads each member's header first and stops the unpacking before a
member that would put a file where a folder is, or a folder where anything else is (the
engine's noOverwriteDirNonDir). It runs as the box's root in every namespace of the box:
nothing it does reaches past the box, and what it prints is untrusted input to paddockd.

The exit codes below are every in-box operation's (runtime/inbox.py's shell uses them too).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import subprocess
import sys
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
# A member's data past what is read ahead goes to tar by splice(2) from this size on:
# the kernel moves it from the socket to tar's pipe, not through this process.
_SPLICE_FROM = 64 << 10
_F_SETPIPE_SZ = 1031  # fcntl's, named in Python only from 3.10

# tar's member types (tarfile's, which costs this program's start more than its use here).
_AREGTYPE, _DIRTYPE, _SPARSE = b"\0", b"5", b"S"
_LONGNAME, _LONGLINK, _PAX, _GLOBAL_PAX = b"L", b"K", b"x", b"g"
_GNU_TYPES = (_LONGNAME, _LONGLINK, _SPARSE)


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


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
            if prefix and kind not in _GNU_TYPES:
                name = prefix + b"/" + name
            if kind == _AREGTYPE and name.endswith(b"/"):
                kind = _DIRTYPE  # an old (V7) tar's folder
            is_dir = kind == _DIRTYPE
            if is_dir:
                name = name.rstrip(b"/")
            return name.decode("utf-8", "surrogateescape"), size, kind, is_dir
    import tarfile  # the rare header that is not plain ustar

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
        return f"cannot overwrite directory {_quoted(target)} with non-directory"
    if not there and is_dir:
        return f"cannot overwrite non-directory {_quoted(target)} with directory"
    return None


def _quoted(path: str) -> str:
    """In double quotes, as the engine's messages quote paths (runtime/inbox.py reads
    them): a JSON string, with quotes, backslashes and control characters as \\u escapes."""
    return '"' + "".join(f"\\u{ord(c):04x}" if c < " " or c in '"\\\x7f' else c for c in path) + '"'


class _Archive:
    """The archive as it arrives on `fd`: read ahead a MiB at a time (a tree of small
    files is thousands of headers), and a large member's data passed to tar by the kernel."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._at = 0  # what of _buf is read already
        self._splice = hasattr(os, "splice")  # Python 3.10 on

    def _fill(self, n: int) -> int:
        """At least n bytes ahead, or all that is left; how many are ahead."""
        while len(self._buf) - self._at < n:
            if self._at:
                del self._buf[: self._at]
                self._at = 0
            piece = os.read(self._fd, _PIECE)
            if not piece:
                break
            self._buf += piece
        return len(self._buf) - self._at

    def read(self, n: int) -> bytes:
        """n bytes; fewer only where the archive ends."""
        have = min(n, self._fill(n))
        out = bytes(self._buf[self._at : self._at + have])
        self._at += have
        return out

    def exactly(self, n: int) -> bytes:
        out = self.read(n)
        if len(out) < n:
            raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
        return out

    def pass_on(self, out: int, n: int) -> None:
        """The next n bytes to the descriptor `out` (a pipe)."""
        while n:
            ahead = len(self._buf) - self._at
            if not ahead and self._splice and n >= _SPLICE_FROM:
                try:
                    moved = os.splice(self._fd, out, n)
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                    self._splice = False  # a source the kernel cannot splice from
                    continue
                if not moved:
                    raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
                n -= moved
                continue
            size = min(n, ahead or _PIECE)
            _write(out, self.exactly(size))
            n -= size


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _source(feed: str | None) -> tuple[_Archive, socket.socket | None]:
    if feed is None:
        return _Archive(sys.stdin.fileno()), None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(feed)
    except OSError as exc:
        conn.close()
        raise Failure(FAILED, f"cannot read the archive from paddockd ({exc})") from None
    return _Archive(conn.fileno()), conn


def put(dest: str, feed: str | None = None) -> None:
    if not os.path.isdir(dest):
        raise Failure(NOT_A_DIRECTORY, f"{dest} is not a folder")
    tar = subprocess.Popen(
        ["tar", "-x", "-f", "-", "-p", "--same-owner", "--numeric-owner", "-C", dest],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert tar.stdin is not None and tar.stderr is not None
    into = tar.stdin.fileno()
    with contextlib.suppress(OSError):  # else the kernel's default size
        fcntl.fcntl(into, _F_SETPIPE_SZ, _PIECE)  # fewer, larger moves into tar
    # Drained all along: tar blocks once a pipe it writes is full, and so would this.
    said = bytearray()
    drain = threading.Thread(target=_keep, args=(tar.stderr, said), daemon=True)
    drain.start()
    src, conn = _source(feed)
    name: str | None = None
    try:
        while True:
            header = src.read(_BLOCK)
            if not header:
                break
            if len(header) < _BLOCK:
                raise Failure(BAD_ARCHIVE, "the archive ends in the middle of a member")
            if header == bytes(_BLOCK):
                _write(into, header)
                continue
            member, size, kind, is_dir = _member(header)
            padded = -(-size // _BLOCK) * _BLOCK
            if kind in (_PAX, _LONGNAME):
                data = src.exactly(padded)
                if kind == _PAX:
                    name = _pax_path(data[:size]) or name
                else:
                    name = data[:size].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                _write(into, header + data)
                continue
            if kind == _SPARSE:
                raise Failure(BAD_ARCHIVE, "sparse members are not taken; send them whole")
            if kind not in (_GLOBAL_PAX, _LONGLINK):
                why = _conflict(dest, name or member, is_dir)
                if why:
                    raise Failure(CONFLICT, why)
                name = None
            _write(into, header)
            src.pass_on(into, padded)
        tar.stdin.close()
    except BrokenPipeError:
        pass  # tar stopped reading: what it said is below
    except BaseException:
        tar.kill()
        tar.wait()
        raise
    finally:
        if conn is not None:
            conn.close()
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
