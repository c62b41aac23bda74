"""`paddock settings [ls|get|set|reset]`: the server's settings, changed while it runs."""

from __future__ import annotations

import argparse
import json

from ..wire.models import Setting
from ._common import call, examples, nested
from ._output import binary_size, listing, reply


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "settings",
        help="the server's settings: defaults for new boxes, capacity, the pool (owner)",
        description="The settings of paddockd.toml the server's owner may change while the "
        "server runs: the default type, TTL, idle stop and network policy of new boxes, box "
        "types, capacity and overcommit, the warm pool, the public URL. A change is kept "
        "over the file's value until `reset`, checked as the file's would be, recorded in "
        "the audit log, and followed by every box made, resumed or stopped from then on "
        "(running boxes keep what they were made with). docs/server.md 'Settings'.",
        epilog=examples(
            "paddock settings ls",
            "paddock settings set boxes.default_ttl 2h",
            "paddock settings set network.default_mode deny-all",
            "paddock settings set pool.types small=2,medium=1",
            """paddock settings set types.xl '{"cpus": 8, "memory_mb": 16384, "pids": 8192}'""",
            "paddock settings reset boxes.default_ttl",
        ),
    )
    cmds = nested(p, default="ls")
    cmds.add_parser(
        "ls", help="every setting, its value and where it comes from", run=cmd_ls, json=True
    )
    get = cmds.add_parser("get", help="one setting, with what it takes", run=cmd_get, json=True)
    get.add_argument("key", metavar="KEY")
    put = cmds.add_parser(
        "set",
        help="change a setting",
        description="Change a setting. VALUE as `get` says it takes: a duration (seconds, "
        "or 90m, 2h, 1d), a number, a choice, a list (a,b), sizes (small=2,medium=1) or a "
        "box type as JSON.",
        run=cmd_set,
        json=True,
    )
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    reset = cmds.add_parser(
        "reset", help="back to paddockd.toml's value (or the default)", run=cmd_reset, json=True
    )
    reset.add_argument("key", metavar="KEY")


def _shown(value: object) -> str:
    if value is None:  # a type that is gone
        return "(none)"
    if isinstance(value, dict) and "memory_mb" in value:  # a box type
        disk = value.get("disk_mb") or 0
        return (
            f"{value.get('cpus', 0):g} CPU, {binary_size(value['memory_mb'] << 20)}, "
            f"disk {binary_size(disk << 20) if disk else 'unlimited'}, {value.get('pids')} pids"
        )
    if isinstance(value, str):
        return value or '""'
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return json.dumps(value)


def _line(s: Setting) -> str:
    was = "" if s.source != "set" else f" (file: {_shown(s.file_value)})"
    if s.source == "set" and s.file_value is None:
        was = " (not in the file)"
    return f"{s.key} = {_shown(s.value)}{was}"


def cmd_ls(args: argparse.Namespace) -> int:
    return listing(
        call(args, lambda c: c.settings()),
        args.json,
        ["KEY", "VALUE", "FROM"],
        lambda s: [s.key, _shown(s.value), s.source],
    )


def cmd_get(args: argparse.Namespace) -> int:
    s = call(args, lambda c: c.get_setting(args.key))

    def describe() -> None:
        print(_line(s))
        print(f"  {s.help}")
        takes = f"one of {', '.join(s.choices)}" if s.choices else s.kind
        print(f"  takes: {takes}; from: {s.source}")

    return reply(args.json, s, describe)


def cmd_set(args: argparse.Namespace) -> int:
    s = call(args, lambda c: c.set_setting(args.key, args.value))
    return reply(args.json, s, f"{_line(s)}: boxes made, resumed or stopped from now follow it")


def cmd_reset(args: argparse.Namespace) -> int:
    s = call(args, lambda c: c.reset_setting(args.key))
    return reply(args.json, s, f"{_line(s)} ({s.source})")
