"""`paddock network ...`: see and change a box's egress policy, read its egress log, and
get an allowlist proposed from what it used."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .._exceptions import InvalidRequest
from ._common import add_json, box_ref, client
from ._output import emit_json, note

if TYPE_CHECKING:
    from .._client import Client
    from .._models import EgressEvent

USAGE = """paddock network [--json] BOX
       paddock network BOX allow-all | deny-all
       paddock network BOX allow TARGET... | allow --add TARGET... [--remove TARGET...]
       paddock network log BOX [--follow] [--limit N] [--json]
       paddock network suggest BOX [--json]"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "network",
        help="show or change a box's egress policy; its egress log; a suggested allowlist",
        usage=USAGE,
        description="Egress policy of a box: allow-all (default), deny-all (new outbound "
        "connections refused; open ones may finish), or an allowlist of IPv4 addresses, "
        "CIDRs, domains and *.wildcard domains (a wildcard covers the names below it, not "
        "the domain itself). Domains work through Paddock's DNS resolver, the only DNS a box "
        "can use: allowed names resolve and their addresses are admitted for the answer's "
        "TTL; other names do not resolve. Cloud metadata, other boxes and the host's own "
        "services are always refused. Changes apply at once to a running box.\n\n"
        "`network log` lists what the box looked up and tried to reach, with the verdict; "
        "`network suggest` proposes an allowlist covering it (run the box under allow-all, "
        "do the work, then lock it down).",
        epilog="examples:\n  paddock network current\n  paddock network current deny-all\n"
        "  paddock network current allow registry.npmjs.org '*.github.com' 198.18.0.0/16\n"
        "  paddock network current allow --add pypi.org --remove 198.18.0.0/16\n"
        "  paddock network log current --follow\n"
        "  paddock network current allow $(paddock network suggest current)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("words", nargs="+", metavar="BOX [MODE [TARGET...]]")
    p.add_argument(
        "--add", nargs="+", default=[], metavar="TARGET", help="with allow: add to the allowlist"
    )
    p.add_argument(
        "--remove", nargs="+", default=[], metavar="TARGET", help="with allow: remove from it"
    )
    p.add_argument("-f", "--follow", action="store_true", help="with log: keep printing")
    p.add_argument("--limit", type=int, default=0, help="with log: only the last N entries")
    add_json(p)
    p.set_defaults(run=cmd_network)


def cmd_network(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    if words[0] in ("log", "suggest") and len(words) == 2:
        with client(args) as c:
            ref = box_ref(words[1])
            return show_log(c, ref, args) if words[0] == "log" else show_suggestion(c, ref, args)
    if words[0] in ("log", "suggest"):
        raise InvalidRequest(f"usage: paddock network {words[0]} BOX")
    return set_or_show(args, words[0], words[1] if len(words) > 1 else None, words[2:])


def set_or_show(args: argparse.Namespace, box: str, mode: str | None, targets: list[str]) -> int:
    if mode not in (None, "allow-all", "deny-all", "allow"):
        raise InvalidRequest(f"unknown network mode {mode!r}: use allow-all, deny-all or allow")
    if mode is None and (targets or args.add or args.remove):
        raise InvalidRequest("targets need a mode: paddock network BOX allow TARGET...")
    ref = box_ref(box)
    with client(args) as c:
        if mode is None:
            spec = c.get_network(ref)
        elif mode != "allow":
            if targets or args.add or args.remove:
                raise InvalidRequest(f"{mode} takes no targets")
            spec = c.set_network(ref, mode)
        else:
            if args.add or args.remove:
                now = c.get_network(ref)
                have = now.allow if now.mode == "allowlist" else []
                targets = edited(ref, [*have, *targets, *args.add], args.remove)
            if not targets:
                raise InvalidRequest(
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

    from .._models import to_wire

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
