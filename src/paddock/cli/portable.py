"""Portable boxes: export, import."""

from __future__ import annotations

import argparse
import os

from ._common import box_ref, client, examples, set_current
from ._output import ProgressLine, binary_size, emit_json, note


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="write a box (or one of its snapshots) to one file",
        description="Write a box's files and settings (type, TTL, network policy, drives by "
        "name) to one compressed file that `paddock import` makes a box of, on this server "
        "or another. A running box keeps running: its disk is copied under a freeze of "
        "milliseconds, as a live snapshot is. Not in the file: the data of named drives, "
        "/var/lib/docker, the box's API keys.",
        epilog=examples(
            "paddock export api-tests -o api-tests.paddock",
            "paddock export api-tests:before-upgrade -o before.paddock",
        ),
        run=cmd_export,
        json=True,
    )
    p.add_argument("box", metavar="BOX[:SNAP]", help="a box, or a box and a snapshot id or label")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")
    p.add_argument("-f", "--force", action="store_true", help="replace FILE if it exists")

    p = sub.add_parser(
        "import",
        help="make a new box of an exported file",
        description="Make a new box of a file from `paddock export` and start it (it becomes "
        "`current`). The whole file is checked before the box is made: a damaged or cut "
        "file is refused and leaves nothing behind. Named drives are mounted by name "
        "(yours, made empty where missing).",
        epilog=examples(
            "paddock import api-tests.paddock",
            "paddock import before.paddock --name api-tests-before --type large",
        ),
        run=cmd_import,
        json=True,
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--name", help="the new box's name (default: the exported box's)")
    p.add_argument("--type", metavar="TYPE", help="box type (default: the exported box's)")
    p.add_argument(
        "--rebase",
        action="store_true",
        help="if this server lacks the image the box was made over, lay its files over this "
        "server's box image (sound between servers of the same Paddock version)",
    )


def cmd_export(args: argparse.Namespace) -> int:
    ref, _, snap = args.box.partition(":")
    with client(args) as c:
        progress = ProgressLine("exporting")
        path = c.export_box(
            box_ref(ref), args.output, snapshot=snap or None, force=args.force, progress=progress
        )
    elapsed = progress.finish()
    if args.json:
        emit_json({"path": str(path), "bytes": progress.done})
    else:
        note(f"exported {args.box} to {path} ({binary_size(progress.done)}) in {elapsed:.1f}s")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    size = os.path.getsize(args.file) if os.path.isfile(args.file) else None
    with client(args) as c:
        progress = ProgressLine("importing", size)
        box = c.import_box(
            args.file, name=args.name, box_type=args.type, rebase=args.rebase, progress=progress
        )
    progress.finish()
    set_current(box.name)
    if args.json:
        emit_json(box)
    else:
        print(box.name)
    return 0
