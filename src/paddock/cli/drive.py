"""Named drives: `paddock drive create|ls|rm`. Each user has their own; the owner sees
everyone's and names another's with `--owner`."""

from __future__ import annotations

import argparse

from ..wire.models import Drive
from ._common import call, examples, megabytes, nested
from ._output import binary_size, emit_json, note, table


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
    c = drive.add_parser(
        "create",
        help="create an empty drive",
        description="Create an empty drive. With --size it is a filesystem of that size: "
        "when it is full, writes in the box fail with 'No space left on device' and "
        "nothing else on the server notices. Without, it grows within the server's disk.",
        epilog=examples("paddock drive create cache", "paddock drive create datasets --size 20g"),
        run=cmd_create,
    )
    c.add_argument("name", metavar="NAME")
    c.add_argument(
        "--size", type=megabytes, metavar="SIZE", help="the most it holds, e.g. 20g or 512m"
    )
    drive.add_parser(
        "ls",
        help="your drives (the owner: everyone's), their size and the boxes using them",
        run=cmd_ls,
        json=True,
    )
    rm = drive.add_parser(
        "rm", help="delete a drive and its data (refused while in use)", run=cmd_rm
    )
    rm.add_argument("name", metavar="NAME")
    rm.add_argument(
        "--owner",
        metavar="USER",
        help="the owner: delete USER's drive (a removed account's: the id `drive ls` shows)",
    )


def cmd_create(args: argparse.Namespace) -> int:
    call(args, lambda c: c.create_drive(args.name, capacity_mb=args.size))
    note(f"drive {args.name} created; mount it with `paddock new --drive {args.name}`")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    drives = call(args, lambda c: c.list_drives())
    if args.json:
        emit_json(drives)
        return 0
    headers = ["NAME", "SIZE", "BOXES"]
    rows = [[d.name, _used(d), ", ".join(d.boxes) or "-"] for d in drives]
    # Only the owner is shown others' drives: then whose each is matters.
    if any(not d.mine for d in drives):
        headers.append("OWNER")
        for row, d in zip(rows, drives, strict=True):
            row.append(_whose(d))
    table(headers, rows)
    if not drives:
        note("no drives yet: `paddock drive create NAME` or `paddock new --drive NAME`")
    return 0


def _used(d: Drive) -> str:
    if d.capacity_mb is None:
        return binary_size(d.size_bytes)
    # One kind of unit in a cell: the size was given in MiB/GiB, so the use is too.
    return f"{binary_size(d.size_bytes)} of {binary_size(d.capacity_mb << 20)}"


def _whose(d: Drive) -> str:
    # A removed account's username is gone: `--owner` names its drives by its id.
    if d.owner == "(removed user)" and d.owner_id:
        return f"{d.owner} {d.owner_id}"
    return d.owner or "-"


def cmd_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_drive(args.name, owner=args.owner))
    note(f"drive {args.name}{f' of {args.owner}' if args.owner else ''} deleted")
    return 0
