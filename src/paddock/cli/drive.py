"""Named drives: `paddock drive create|ls|rm`."""

from __future__ import annotations

import argparse

from ._common import add_json, client, nested
from ._output import emit_json, note, size, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "drive",
        help="named drives that outlive boxes",
        description="Named drives are mounted at /mnt/NAME (`paddock new --drive NAME[:ro]`), "
        "can be shared by several boxes, keep their data when boxes are deleted, and are "
        "never part of a snapshot, fork or restore.",
    )
    drive = nested(p)
    c = drive.add_parser("create", help="create an empty drive")
    c.add_argument("name", metavar="NAME")
    c.set_defaults(run=cmd_create)
    ls = drive.add_parser("ls", help="drives, their size and the boxes using them")
    add_json(ls)
    ls.set_defaults(run=cmd_ls)
    rm = drive.add_parser("rm", help="delete a drive and its data (refused while in use)")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(run=cmd_rm)


def cmd_create(args: argparse.Namespace) -> int:
    with client(args) as c:
        c.create_drive(args.name)
    note(f"drive {args.name} created; mount it with `paddock new --drive {args.name}`")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with client(args) as c:
        drives = c.list_drives()
    if args.json:
        emit_json(drives)
        return 0
    table(
        ["NAME", "SIZE", "BOXES"],
        [[d.name, size(d.size_bytes), ", ".join(d.boxes) or "-"] for d in drives],
    )
    if not drives:
        note("no drives yet: `paddock drive create NAME` or `paddock new --drive NAME`")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with client(args) as c:
        c.delete_drive(args.name)
    note(f"drive {args.name} deleted")
    return 0
