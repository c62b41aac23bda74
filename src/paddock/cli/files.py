"""push and pull: copy files into and out of a box as tar streams."""

from __future__ import annotations

import argparse

from ._common import add_json, box_ref, client
from ._output import ProgressLine, emit_json, note, size


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "push",
        help="copy local files or folders into a box",
        description="Copy into a box. One folder: its contents land in DEST (created). One "
        "file: it becomes DEST, or goes inside DEST if that is a folder. Several sources: "
        "each goes in DEST/<name>. Modes, times and symlinks are kept; files belong to the "
        "box user. A .paddockignore (gitignore syntax) in a pushed folder is honoured.",
        epilog="example:\n  paddock push current . --to /config/project --exclude node_modules",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("box", metavar="BOX")
    p.add_argument("sources", nargs="+", metavar="SRC")
    p.add_argument(
        "--to", required=True, metavar="DEST", help="path in the box (relative: under /config)"
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="gitignore-style pattern to skip (repeatable)",
    )
    p.add_argument(
        "--owner",
        default="1000:1000",
        metavar="UID:GID",
        help="owner of the files in the box (default the box user)",
    )
    add_json(p)
    p.set_defaults(run=cmd_push)

    p = sub.add_parser(
        "pull",
        help="copy a file or folder out of a box",
        description="Copy SRC out of a box to DEST (into DEST when it is an existing folder). "
        "Nothing is ever written outside DEST; existing files are kept unless --force.",
        epilog="example:\n  paddock pull current /config/project/dist --to ./dist",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("box", metavar="BOX")
    p.add_argument("src", metavar="SRC", help="path in the box (relative: under /config)")
    p.add_argument("--to", default=".", metavar="DEST", help="local destination (default: .)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite existing files")
    add_json(p)
    p.set_defaults(run=cmd_pull)


def cmd_push(args: argparse.Namespace) -> int:
    uid, _, gid = args.owner.partition(":")
    with client(args) as c:
        progress = ProgressLine("pushing", c.push_size(args.sources, args.exclude))
        result = c.push(
            box_ref(args.box),
            args.sources,
            args.to,
            exclude=args.exclude,
            owner=(int(uid), int(gid or uid)),
            progress=progress,
        )
    elapsed = progress.finish()
    if args.json:
        emit_json(result)
    else:
        note(f"pushed {size(progress.done)} to {result.path} in {elapsed:.1f}s")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    with client(args) as c:
        progress = ProgressLine("pulling")
        target = c.pull(box_ref(args.box), args.src, args.to, force=args.force, progress=progress)
    elapsed = progress.finish()
    if args.json:
        emit_json({"path": str(target), "bytes": progress.done})
    else:
        note(f"pulled {args.src} to {target} in {elapsed:.1f}s")
    return 0
