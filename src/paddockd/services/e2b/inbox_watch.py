"""Runs inside a box, never in paddockd: envd's directory watch on the kernel's inotify.

paddockd sends this file's text as `python3 -c TEXT FOLDER RECURSIVE ENTRIES` (as the
caller's box user, so the box's own permissions decide what can be watched) and reads its
stdout, one JSON object a line:

    {"ready": true}                      the watches are set: events from now on are seen
    {"error": "missing" | "notdir" | "inotify", "message": "..."}    then it exits
    {"t": "create" | "write" | "remove" | "rename" | "chmod", "n": "sub/name", "e": [...]}

`n` is relative to the folder; `e` (with ENTRIES=1) is the entry's stat in the field order
of envd_filesystem's listing. The event names are those of fsnotify, which E2B's envd uses:
a rename is `rename` on the old name and `create` on the new one. It ends when its stdin
closes (paddockd stopped listening), its stdout is gone, or the folder itself goes.
Standard library only, and no syntax newer than the box images' Python needs."""

from __future__ import annotations

import contextlib
import ctypes
import grp
import json
import os
import pwd
import select
import stat
import struct
import sys

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
# In this order: a new file's first event is its creation, whatever else the kernel merged.
TYPES = (
    (IN_CREATE, "create"),
    (IN_MOVED_TO, "create"),
    (IN_MOVED_FROM, "rename"),
    (IN_DELETE, "remove"),
    (IN_MODIFY, "write"),
    (IN_ATTRIB, "chmod"),
)
HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len
# A tree deeper or wider than this is watched only in part (each watch is kernel memory).
MAX_WATCHES = 8192


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(code: str, message: str) -> None:
    emit({"error": code, "message": message})
    sys.exit(1)


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "f" if stat.S_ISREG(mode) else "p"


def entry(path: bytes) -> list[str] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    kind = kind_of(st.st_mode)
    target, link = kind, ""
    if kind == "l":
        try:
            link = text(os.readlink(path))
            target = kind_of(os.stat(path).st_mode)
        except OSError:
            target = "N"
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return [
        kind,
        target,
        str(st.st_size),
        stat.filemode(st.st_mode),
        format(stat.S_IMODE(st.st_mode), "o"),
        owner,
        group,
        repr(st.st_mtime),
        link,
        text(path),
        str(st.st_uid),
        str(st.st_gid),
    ]


def main(argv: list[str]) -> None:
    root = os.fsencode(argv[1])
    recursive, entries = argv[2] == "1", argv[3] == "1"
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK))
    if fd < 0:
        fail("inotify", os.strerror(ctypes.get_errno()))
    try:
        if not stat.S_ISDIR(os.stat(root).st_mode):
            fail("notdir", f"not a directory: {text(root)}")
    except FileNotFoundError:
        fail("missing", f"no such file or directory: {text(root)}")
    except OSError as exc:
        fail("missing", f"{text(root)}: {exc.strerror}")
    dirs: dict[int, bytes] = {}

    def watch(rel: bytes) -> int:
        if len(dirs) >= MAX_WATCHES:
            return -1
        wd = int(libc.inotify_add_watch(fd, os.path.join(root, rel) if rel else root, MASK))
        if wd >= 0:
            dirs[wd] = rel
        return wd

    def watch_tree(rel: bytes, listed: bool = False) -> list[bytes]:
        """Watch every folder under `rel`; with `listed`, what is in them already
        (relative names: a new folder's, never the whole watched tree's)."""
        found = []
        for top, subdirs, files in os.walk(os.path.join(root, rel)):
            for name in subdirs:
                watch(os.path.relpath(os.path.join(top, name), root))
            if listed:
                found += [os.path.relpath(os.path.join(top, n), root) for n in subdirs + files]
        return found

    def say(kind: str, rel: bytes) -> None:
        event: dict[str, object] = {"t": kind, "n": text(rel)}
        if entries and kind not in ("remove", "rename"):
            event["e"] = entry(os.path.join(root, rel))
        emit(event)

    top = watch(b"")
    if top < 0:
        fail("inotify", os.strerror(ctypes.get_errno()))
    if recursive:
        watch_tree(b"")
    emit({"ready": True})
    while True:
        readable, _, _ = select.select([fd, 0], [], [])
        if 0 in readable and not os.read(0, 4096):
            return
        if fd not in readable:
            continue
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        at = 0
        while at + HEADER.size <= len(data):
            wd, mask, _cookie, size = HEADER.unpack_from(data, at)
            name = data[at + HEADER.size : at + HEADER.size + size].rstrip(b"\0")
            at += HEADER.size + size
            if mask & IN_Q_OVERFLOW:
                emit({"overflow": True})
                continue
            if wd not in dirs:
                continue
            if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                if wd == top:
                    return  # the folder itself went
                if mask & IN_IGNORED:
                    del dirs[wd]
                continue
            rel = os.path.join(dirs[wd], name) if dirs[wd] else name
            inside: list[bytes] = []
            if recursive and mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                watch(rel)
                inside = watch_tree(rel, listed=True)
            for bit, kind in TYPES:
                if mask & bit:
                    say(kind, rel)
                    break
            # Made in the new folder before its watch was set (`mkdir d && touch d/f`):
            # each is a create, as fsnotify's recursive watchers report them.
            for found in inside:
                say("create", found)


if __name__ == "__main__":
    # paddockd went away: nobody is left to tell.
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        main(sys.argv)
