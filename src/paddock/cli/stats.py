"""`paddock stats [BOX]`: what boxes use now, against their limits."""

from __future__ import annotations

import argparse

from ..wire.models import BoxStats
from ._common import box_ref, call, examples
from ._output import binary_size, reply, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "stats",
        help="CPU, memory, disk and processes of boxes",
        description="What each box uses now against its limits: CPU (100% = one whole CPU, "
        "measured over a quarter second), memory (without page cache the kernel can drop), "
        "disk (its writable layer and its /var/lib/docker volume; drives are in `paddock "
        "drive ls`) and processes. Without BOX: all your boxes; stopped boxes show their "
        "state only.",
        epilog=examples("paddock stats", "paddock stats current --json"),
        run=cmd_stats,
        json=True,
    )
    p.add_argument("box", metavar="BOX", nargs="?", help="one box (default: all)")


def cmd_stats(args: argparse.Namespace) -> int:
    rows = call(args, lambda c: [c.box_stats(box_ref(args.box))] if args.box else c.stats())
    return reply(
        args.json,
        rows[0] if args.box else rows,
        lambda: table(["BOX", "STATE", "CPU", "MEMORY", "DISK", "PIDS"], [_row(s) for s in rows]),
    )


def _row(s: BoxStats) -> list[str]:
    if s.cpu_percent is None:
        return [s.name, s.state, "-", "-", "-", "-"]
    return [
        s.name,
        s.state,
        f"{s.cpu_percent:.1f}% of {s.cpus:g}",
        _of(s.memory_bytes, s.memory_limit_bytes),
        _of(s.disk_bytes, s.disk_quota_bytes),
        f"{s.pids} / {s.pids_limit}" if s.pids_limit else str(s.pids),
    ]


def _of(used: int | None, limit: int | None) -> str:
    shown = binary_size(used or 0)
    return f"{shown} / {binary_size(limit)}" if limit else shown
