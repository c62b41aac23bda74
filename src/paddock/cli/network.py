"""`paddock network ...`: see and change a box's egress policy, read its egress log, and
get an allowlist proposed from what it used."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..wire.errors import InvalidRequest
from ._common import UsageError, box_ref, call, client, examples, nested
from ._output import emit_json, note

if TYPE_CHECKING:
    from .._client import Client
    from ..wire.models import EgressEvent


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "network",
        help="a box's egress policy, its egress log, a suggested allowlist",
        description="Egress policy of a box: allow-all (default), deny-all (new outbound "
        "connections refused; open ones may finish), or an allowlist of IPv4 addresses, "
        "CIDRs, domains and *.wildcard domains (a wildcard covers the names below it, not "
        "the domain itself). Domains work through Paddock's DNS resolver, the only DNS a box "
        "can use: allowed names resolve and their addresses are admitted for the answer's "
        "TTL; other names do not resolve. Cloud metadata, other boxes and the host's own "
        "services are always refused. Changes apply at once to a running box.\n\n"
        "  paddock network [policy] BOX [allow-all | deny-all | allow TARGET...]\n"
        "  paddock network log BOX [--follow] [--limit N] [--json]\n"
        "  paddock network suggest BOX [--json]\n\n"
        "`network log` lists what the box looked up and tried to reach, with the verdict; "
        "`network suggest` proposes an allowlist covering it (run the box under allow-all, "
        "do the work, then lock it down).",
        epilog=examples(
            "paddock network current",
            "paddock network current deny-all",
            "paddock network current allow registry.npmjs.org '*.github.com' 198.18.0.0/16",
            "paddock network current allow --add pypi.org --remove 198.18.0.0/16",
            "paddock network log current --limit 20",
            "paddock network current allow $(paddock network suggest current)",
        ),
    )
    network = nested(p, default="policy")
    policy = network.add_parser(
        "policy",
        help="show or set a box's egress policy (the default)",
        description="Show a box's egress policy, or set it: allow-all, deny-all, or allow "
        "TARGET... (IPv4 addresses, CIDRs, domains, *.domains). --add and --remove edit the "
        "allowlist it has; removing what is not there is an error.",
        run=cmd_policy,
        box="one",
        json=True,
    )
    policy.add_argument("mode", nargs="?", choices=MODES, metavar="MODE", help=", ".join(MODES))
    policy.add_argument("targets", nargs="*", metavar="TARGET", help="with allow: the allowlist")
    policy.add_argument(
        "--add", nargs="+", default=[], metavar="TARGET", help="with allow: add to the allowlist"
    )
    policy.add_argument(
        "--remove", nargs="+", default=[], metavar="TARGET", help="with allow: remove from it"
    )

    log = network.add_parser(
        "log",
        help="what a box looked up and tried to reach, with the verdicts",
        description="The box's egress log: every name it looked up and every destination it "
        "tried, allowed or refused, oldest first.",
        run=cmd_log,
        box="one",
        json=True,
    )
    log.add_argument("-f", "--follow", action="store_true", help="keep printing new entries")
    log.add_argument("--limit", type=int, default=0, metavar="N", help="only the last N entries")

    network.add_parser(
        "suggest",
        help="an allowlist covering what a box used",
        description="Propose an allowlist covering what the box's egress log shows it used: "
        "the names it resolved (three or more siblings become *.parent) and /32s for "
        "addresses it reached without a name.",
        run=cmd_suggest,
        box="one",
        json=True,
    )


MODES = ("allow-all", "deny-all", "allow")


def cmd_policy(args: argparse.Namespace) -> int:
    return set_or_show(args, args.box, args.mode, args.targets)


def cmd_log(args: argparse.Namespace) -> int:
    return call(args, lambda c: show_log(c, box_ref(args.box), args))


def cmd_suggest(args: argparse.Namespace) -> int:
    return call(args, lambda c: show_suggestion(c, box_ref(args.box), args))


def set_or_show(args: argparse.Namespace, box: str, mode: str | None, targets: list[str]) -> int:
    if mode is None and (targets or args.add or args.remove):
        raise UsageError("targets need a mode: paddock network BOX allow TARGET...")
    ref = box_ref(box)
    with client(args) as c:
        if mode is None:
            spec = c.get_network(ref)
        elif mode != "allow":
            if targets or args.add or args.remove:
                raise UsageError(f"{mode} takes no targets")
            spec = c.set_network(ref, mode)
        else:
            if args.add or args.remove:
                now = c.get_network(ref)
                have = now.allow if now.mode == "allowlist" else []
                targets = edited(ref, [*have, *targets, *args.add], args.remove)
            if not targets:
                raise UsageError(
                    "an empty allowlist is deny-all: say `paddock network "
                    f"{ref} deny-all` if that is what you want"
                )
            spec = c.set_network(ref, "allowlist", targets)
    if args.json:
        emit_json(spec)
    else:
        print(spec.mode + ("" if not spec.allow else ": " + " ".join(spec.allow)))
        if mode:
            note("applied")
    return 0


def normalized(target: str) -> str:
    """An allowlist entry as the server stores it (paddockd's `parse_target`): lower case,
    no trailing dot, an address as its /32. Anything it would refuse is left as given."""
    import ipaddress
    import re

    text = target.strip().lower().rstrip(".")
    if re.fullmatch(r"[0-9./]+", text):
        try:
            return str(ipaddress.IPv4Network(text))
        except ValueError:
            return text
    return text


def edited(box: str, targets: list[str], remove: list[str]) -> list[str]:
    """`targets` without `remove`, compared as the server would store them; removing
    what is not there is an error that names it (a typo must not pass silently)."""
    kept = list(dict.fromkeys(normalized(t) for t in targets))
    gone = [normalized(t) for t in remove]
    missing = [t for t in gone if t not in kept]
    if missing:
        have = " ".join(kept) or "nothing"
        raise InvalidRequest(
            f"not in the allowlist of box {box}: {' '.join(missing)} (it has: {have})"
        )
    return [t for t in kept if t not in gone]


def _line(e: EgressEvent) -> str:
    verdict = "ALLOWED" if e.verdict == "allowed" else "REFUSED"
    if e.kind == "dns":
        what = f"dns  {e.name}" + (f" -> {e.address}" if e.address else "")
    else:
        where = f"{e.address}:{e.port}/{e.proto}"
        what = f"conn {where}" + (f" ({e.name})" if e.name else "")
        what += f" x{e.count}" if e.count > 1 else ""
    return f"{e.time}  {verdict}  {what}"


def show_log(c: Client, ref: str, args: argparse.Namespace) -> int:
    """One line per entry; with --json one JSON object per line (also when following)."""
    import json

    from ..wire.models import to_wire

    events = c.follow_network_log(ref, limit=args.limit) if args.follow else None
    for event in events if events is not None else c.network_log(ref, limit=args.limit):
        print(json.dumps(to_wire(event)) if args.json else _line(event), flush=True)
    return 0


def show_suggestion(c: Client, ref: str, args: argparse.Namespace) -> int:
    found = c.suggest_network(ref)
    if args.json:
        emit_json(found)
    elif not found.allow:
        note(f"nothing to suggest: the egress log has {found.based_on} entries and none usable")
    else:
        print(" ".join(found.allow))
        note(f"from {found.based_on} egress log entries; apply with:")
        note(f"  paddock network {ref} allow " + " ".join(f"'{t}'" for t in found.allow))
    return 0
