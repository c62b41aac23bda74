"""`paddock network BOX ...`: see and change a box's egress policy."""

from __future__ import annotations

import argparse

from .._exceptions import InvalidRequest
from ._common import add_json, box_ref, client
from ._output import emit_json, note


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "network",
        help="show or change a box's egress policy",
        description="Egress policy of a box: allow-all (default), deny-all (new outbound "
        "connections refused; open ones may finish), or an allowlist of IPv4 addresses and "
        "CIDRs. Cloud metadata, other boxes and the host's own services are always refused. "
        "Changes apply at once to a running box.",
        epilog="examples:\n  paddock network current\n  paddock network current deny-all\n"
        "  paddock network current allow 198.18.0.0/16 198.19.4.7\n"
        "  paddock network current allow --add 198.19.0.0/24",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("box", metavar="BOX")
    p.add_argument("mode", nargs="?", choices=["allow-all", "deny-all", "allow"], help="new policy")
    p.add_argument("targets", nargs="*", metavar="TARGET", help="with allow: IPv4 addresses/CIDRs")
    p.add_argument(
        "--add", nargs="+", default=[], metavar="TARGET", help="with allow: add to the allowlist"
    )
    p.add_argument(
        "--remove", nargs="+", default=[], metavar="TARGET", help="with allow: remove from it"
    )
    add_json(p)
    p.set_defaults(run=cmd_network)


def cmd_network(args: argparse.Namespace) -> int:
    ref = box_ref(args.box)
    with client(args) as c:
        if args.mode is None:
            spec = c.get_network(ref)
        elif args.mode != "allow":
            if args.targets or args.add or args.remove:
                raise InvalidRequest(f"{args.mode} takes no targets")
            spec = c.set_network(ref, args.mode)
        else:
            targets = list(args.targets)
            if args.add or args.remove:
                current = c.get_network(ref)
                have = current.allow if current.mode == "allowlist" else []
                targets = [t for t in [*have, *targets, *args.add] if t not in args.remove]
                targets = list(dict.fromkeys(targets))
            if not targets:
                raise InvalidRequest(
                    "an empty allowlist is deny-all: say `paddock network "
                    f"{args.box} deny-all` if that is what you want"
                )
            spec = c.set_network(ref, "allowlist", targets)
    if args.json:
        emit_json(spec)
    else:
        print(spec.mode + ("" if not spec.allow else ": " + " ".join(spec.allow)))
        if args.mode:
            note("applied")
    return 0
