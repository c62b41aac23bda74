"""push, pull and cp: copy files into and out of a box as tar streams, by docker cp's rules."""

from __future__ import annotations

import argparse
import os

from .._placement import RULES
from ._common import UsageError, box_ref, client, examples
from ._output import ProgressLine, binary_size, emit_json, note

PULL_SAFETY = (
    "A pull never writes outside DEST nor through a link; links are kept as links, as the "
    "box has them (a .venv's python3 -> /usr/bin/python3 too). It is written aside and "
    "moved into place when whole, so a failed pull leaves DEST as it was; files already "
    "there are kept unless --force."
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "push",
        help="copy local files or folders into a box",
        description="Copy local files or folders into a box. Modes, times and symlinks are "
        "kept; files belong to the box user; files in the way in the box are replaced. A "
        ".paddockignore (gitignore syntax) in a pushed folder is honoured. Several SRCs go "
        "into the folder DEST (created if missing).\n\n" + RULES,
        epilog=examples(
            "paddock push current . --to /config/project",
            "paddock push current notes.txt --to /config/",
        ),
        run=cmd_push,
        box="one",
        json=True,
    )
    p.add_argument("sources", nargs="+", metavar="SRC", help="local files or folders")
    p.add_argument(
        "--to", required=True, metavar="DEST", help="path in the box (relative: under /config)"
    )
    _push_options(p)
    _exclude_option(p)

    p = sub.add_parser(
        "pull",
        help="copy a file or folder out of a box",
        description=f"Copy a file or folder out of a box. {PULL_SAFETY}\n\n{RULES}",
        epilog=examples(
            "paddock pull current /config/project/dist --to .",
            "paddock pull current /config/project/dist/. --to ./site --force",
            "paddock pull current /config/project --to . --exclude .venv/",
        ),
        run=cmd_pull,
        box="one",
        json=True,
    )
    p.add_argument("src", metavar="SRC", help="path in the box (relative: under /config)")
    p.add_argument("--to", default=".", metavar="DEST", help="local destination (default: .)")
    _pull_options(p)

    p = sub.add_parser(
        "cp",
        help="copy between here and a box, as docker cp (BOX:PATH on one side)",
        description="`paddock cp BOX:PATH LOCAL` is `paddock pull`, `paddock cp LOCAL... "
        "BOX:PATH` is `paddock push`. BOX may be `current`; `BOX:` alone is the box user's "
        "home (/config), as is a relative PATH's start. A local path with a colon in it "
        f"starts with / or ./ . {PULL_SAFETY}\n\n{RULES}",
        usage="paddock cp [options] BOX:PATH LOCAL\n       paddock cp [options] LOCAL... BOX:PATH",
        epilog=examples(
            "paddock cp current:/config/project/dist .",
            "paddock cp ./src/. current:/config/project",
        ),
        run=cmd_cp,
        json=True,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="SRC... DEST, one side BOX:PATH")
    _push_options(p, " (into a box)")
    _pull_options(p, " (out of a box)")
    _exclude_option(p)


def _exclude_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="gitignore-style pattern to skip (repeatable; `dir/` for folders)",
    )


def _push_options(p: argparse.ArgumentParser, only: str = "") -> None:
    p.add_argument(
        "--owner",
        metavar="UID:GID",
        help=f"owner of the files in the box (default 1000:1000, the box user){only}",
    )
    p.add_argument(
        "--wake", action="store_true", help=f"start the box first if it is stopped{only}"
    )


def _pull_options(p: argparse.ArgumentParser, only: str = "") -> None:
    p.add_argument("-f", "--force", action="store_true", help=f"overwrite existing files{only}")
    if not only:  # cp has it once, for both ways
        _exclude_option(p)


def cmd_push(args: argparse.Namespace) -> int:
    return _push(args, args.box, args.sources, args.to)


def cmd_pull(args: argparse.Namespace) -> int:
    return _pull(args, args.box, args.src, args.to)


def cmd_cp(args: argparse.Namespace) -> int:
    if len(args.paths) < 2:
        raise UsageError("give SRC and DEST: paddock cp BOX:PATH LOCAL, or LOCAL... BOX:PATH")
    *sources, dest = args.paths
    into = box_side(dest)
    if into is not None:
        if any(box_side(src) for src in sources):
            raise UsageError("one side of cp is local: copy between two boxes through here")
        if args.force:
            raise UsageError("--force is for copies out of a box (a push replaces files)")
        return _push(args, into[0], sources, into[1])
    out_of = box_side(sources[0])
    if len(sources) > 1 or out_of is None:
        raise UsageError("name the box side as BOX:PATH (e.g. current:/config/project)")
    if args.owner or args.wake:
        raise UsageError("--owner and --wake are for copies into a box")
    return _pull(args, out_of[0], out_of[1], dest)


def box_side(arg: str) -> tuple[str, str] | None:
    """`BOX:PATH` as (BOX, PATH), or None for a local path: one without a colon, or that
    starts with / or . (as with docker cp, `./a:b` is local), or a Windows drive path."""
    if ":" not in arg or arg.startswith(("/", ".")) or os.path.isabs(arg):
        return None
    box, _, path = arg.partition(":")
    return box, path or "."


def _push(args: argparse.Namespace, box: str, sources: list[str], dest: str) -> int:
    uid, _, gid = (args.owner or "1000:1000").partition(":")
    if not (uid.isdigit() and (gid or uid).isdigit()):
        raise UsageError(f"--owner takes UID:GID in numbers, not {args.owner!r}")
    with client(args) as c:
        progress = ProgressLine("pushing", c.push_size(sources, args.exclude))
        result = c.push(
            box_ref(box),
            sources,
            dest,
            exclude=args.exclude,
            owner=(int(uid), int(gid or uid)),
            progress=progress,
            wake=args.wake,
        )
    elapsed = progress.finish()
    if args.json:
        emit_json(result)
    else:
        note(f"pushed {binary_size(progress.done)} to {result.path} in {elapsed:.1f}s")
    return 0


def _pull(args: argparse.Namespace, box: str, src: str, dest: str) -> int:
    with client(args) as c:
        progress = ProgressLine("pulling")
        target = c.pull(
            box_ref(box), src, dest, force=args.force, exclude=args.exclude, progress=progress
        )
    elapsed = progress.finish()
    if args.json:
        emit_json({"path": str(target), "bytes": progress.done})
    else:
        note(f"pulled {src} to {target} in {elapsed:.1f}s")
    return 0
