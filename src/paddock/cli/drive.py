"""Named drives: `paddock drive create|ls|rm`. Each user has their own; the owner sees
everyone's and names another's with `--owner`."""

from __future__ import annotations

import argparse

from .._models import Drive
from ._common import add_json, client, nested
from ._output import emit_json, note, size, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "drive",
        help="named drives that outlive boxes",
        description="Named drives are mounted at /mnt/NAME (`paddock new --drive NAME[:ro]`), "
        "can be shared by several of your boxes, keep their data when boxes are deleted, and "
        "are never part of a snapshot, fork or restore. Drives are per user: yours are yours "
        "alone, and another user may have a drive of the same name.",
    )
    drive = nested(p)
    c = drive.add_parser("create", help="create an empty drive")
    c.add_argument("name", metavar="NAME")
    c.set_defaults(run=cmd_create)
    ls = drive.add_parser(
        "ls", help="your drives (the owner: everyone's), their size and the boxes using them"
    )
    add_json(ls)
    ls.set_defaults(run=cmd_ls)
    rm = drive.add_parser("rm", help="delete a drive and its data (refused while in use)")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument(
        "--owner",
        metavar="USER",
        help="the owner: delete USER's drive (a removed account's: the id `drive ls` shows)",
    )
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
    headers = ["NAME", "SIZE", "BOXES"]
    rows = [[d.name, size(d.size_bytes), ", ".join(d.boxes) or "-"] for d in drives]
    # Only the owner is shown others' drives: then whose each is matters.
    if any(not d.mine for d in drives):
        headers.append("OWNER")
        for row, d in zip(rows, drives, strict=True):
            row.append(_whose(d))
    table(headers, rows)
    if not drives:
        note("no drives yet: `paddock drive create NAME` or `paddock new --drive NAME`")
    return 0


def _whose(d: Drive) -> str:
    # A removed account's username is gone: `--owner` names its drives by its id.
    if d.owner == "(removed user)" and d.owner_id:
        return f"{d.owner} {d.owner_id}"
    return d.owner or "-"


def cmd_rm(args: argparse.Namespace) -> int:
    with client(args) as c:
        c.delete_drive(args.name, owner=args.owner)
    note(f"drive {args.name}{f' of {args.owner}' if args.owner else ''} deleted")
    return 0
