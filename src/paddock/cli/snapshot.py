"""Snapshot commands: snapshot, snapshots, restore, fork."""

from __future__ import annotations

import argparse

from ..wire.models import Box
from ._common import UsageError, box_ref, call, client, nested
from ._output import binary_size, emit_json, note, since, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "snapshot",
        help="snapshot a box's files now",
        description="Take a snapshot of a box's filesystem now. A running box is paused "
        "only while its changes are written. Snapshots keep files only: not memory, not "
        "running processes, not /var/lib/docker, not named drives.",
        run=cmd_snapshot,
        box="one",
        json=True,
    )
    p.add_argument("--name", dest="label", metavar="LABEL", help="a label to restore or fork by")

    p = sub.add_parser(
        "snapshots",
        help="list a box's snapshots, or delete one",
        description="List a box's snapshots, or delete one:\n"
        "  paddock snapshots [ls] BOX [--json]\n"
        "  paddock snapshots rm BOX SNAP",
    )
    snapshots = nested(p, default="ls")
    snapshots.add_parser(
        "ls",
        help="list a box's snapshots (the default)",
        description="List a box's snapshots, newest first: id, label, kind, age, size; * marks "
        "the one its files were last saved to.",
        run=cmd_snapshots,
        box="one",
        json=True,
    )
    rm = snapshots.add_parser(
        "rm",
        help="delete a snapshot",
        description="Delete a box's snapshot. The one a box's files stand on (or a fork's) "
        "is refused until it is not needed.",
        run=cmd_snapshots_rm,
        box="one",
    )
    rm.add_argument("snap", metavar="SNAP", help="snapshot id or label")

    p = sub.add_parser(
        "restore",
        help="rewind a box to a snapshot",
        description="Return a box's files to a snapshot. The box keeps its name, type, TTL "
        "and drives; drive contents are not rolled back. A running box restarts.",
        run=cmd_restore,
        box="one",
        json=True,
    )
    p.add_argument("--snapshot", required=True, metavar="SNAP", help="snapshot id or label")

    p = sub.add_parser(
        "fork",
        help="a new box from a box's files (now, or a snapshot)",
        description="Make a new box from a box's current files (taken live) or one of its "
        "snapshots. The two change independently afterwards; the fork keeps the type, TTL "
        "and drives; the current box stays as it was (`paddock use NEW` switches).",
        run=cmd_fork,
        box="one",
        json=True,
    )
    p.add_argument("--name", help="name of the new box (generated if absent)")
    p.add_argument("--snapshot", metavar="SNAP", help="fork from this snapshot instead")
    p.add_argument("--type", metavar="TYPE", help="box type of the fork (default: the source's)")
    p.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="make N forks at once, all or none (named PREFIX-1 .. PREFIX-N)",
    )
    p.add_argument("--name-prefix", metavar="PREFIX", help="with --count: the forks' names' prefix")


def cmd_snapshot(args: argparse.Namespace) -> int:
    snap = call(args, lambda c: c.snapshot_box(box_ref(args.box), args.label))
    if args.json:
        emit_json(snap)
    else:
        print(snap.id)
        label = f" ({snap.label})" if snap.label else ""
        note(f"snapshot {snap.id}{label} taken, {binary_size(snap.size_bytes)}")
    return 0


def cmd_snapshots_rm(args: argparse.Namespace) -> int:
    ref = box_ref(args.box)
    call(args, lambda c: c.delete_snapshot(ref, args.snap))
    note(f"snapshot {args.snap} of box {ref} deleted")
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    snaps = call(args, lambda c: c.list_snapshots(box_ref(args.box)))
    if args.json:
        emit_json(snaps)
        return 0
    rows = [
        [
            ("* " if s.current else "  ") + str(s.id),
            s.label or "-",
            s.kind,
            since(s.created_at),
            binary_size(s.size_bytes),
            "-" if s.own_bytes is None else binary_size(s.own_bytes),
            "-" if s.shared_bytes is None else binary_size(s.shared_bytes),
        ]
        for s in snaps
    ]
    # OWN: what removing it frees; SHARED: what it has in common with the box's disk,
    # its other snapshots and forks (copies of a disk share blocks until one changes).
    table(["  ID", "LABEL", "KIND", "CREATED", "SIZE", "OWN", "SHARED"], rows)
    if not snaps:
        note("no snapshots yet: `paddock stop` or `paddock snapshot` takes one")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    box = call(args, lambda c: c.restore_box(box_ref(args.box), args.snapshot))
    if args.json:
        emit_json(box)
    else:
        note(f"box {box.name} restored to snapshot {args.snapshot} ({box.state})")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    source = box_ref(args.box)
    if args.count is None:
        if args.name_prefix is not None:
            raise UsageError("--name-prefix goes with --count (one fork takes --name)")
    elif args.name is not None:
        raise UsageError("--count makes several forks: name them with --name-prefix")
    with client(args) as c:
        if args.count is not None:
            forks = c.fork_boxes(
                source, args.count, args.name_prefix, args.snapshot, box_type=args.type
            )
            return _forked(args, source, forks)
        box = c.fork_box(source, args.name, args.snapshot, box_type=args.type)
    if args.json:
        emit_json(box)
    else:
        print(box.name)
        # The current box stays: a script that forks to try something keeps its footing.
        note(f"box {box.name} forked from {source}; switch to it with `paddock use {box.name}`")
    return 0


def _forked(args: argparse.Namespace, source: str, forks: list[Box]) -> int:
    if args.json:
        emit_json(forks)
        return 0
    for box in forks:
        print(box.name)
    note(f"{len(forks)} boxes forked from {source}")
    return 0
