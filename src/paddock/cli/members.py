"""People and tokens: `paddock members invite|ls|rm` (the owner) and `paddock token
ls|create|rm` (everyone, for their own tokens)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from ..wire.errors import NotFound
from ._common import call, client, examples, megabytes, nested, seconds_arg
from ._output import emit_json, listing, note, reply, since, until

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..wire.models import Member


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "members",
        help="invite people to this server, list and remove them (the owner)",
        description="A member sees and acts on only their own boxes; the owner, on all. "
        "An invitation is a one-time link, valid 7 days.",
    )
    members = nested(p)
    inv = members.add_parser(
        "invite", help="print a one-time link that creates an account", run=cmd_invite, json=True
    )
    inv.add_argument("--role", choices=["member", "owner"], default="member")
    members.add_parser("ls", help="everyone with an account", run=cmd_ls, json=True)
    lim = members.add_parser(
        "limits",
        help="set what a member may claim: boxes, CPUs, memory",
        description="Set a member's limits; flags left out keep their value, `none` lifts "
        "one. Boxes count running or stopped; CPUs and memory count running boxes. Running "
        "boxes keep running: the limits apply to the next `new` or `resume`.",
        epilog=examples(
            "paddock members limits ana --max-boxes 3 --max-memory 8g",
            "paddock members limits ana --max-cpus none",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        run=cmd_limits,
        json=True,
    )
    lim.add_argument("username", metavar="USER")
    lim.add_argument("--max-boxes", type=_limit(int, "a number of boxes"), metavar="N|none")
    lim.add_argument("--max-cpus", type=_limit(float, "a number of CPUs"), metavar="N|none")
    lim.add_argument("--max-memory", type=_memory, metavar="SIZE|none", help="e.g. 8g, 512m")
    rm = members.add_parser(
        "rm",
        help="remove an account: sessions end, tokens are revoked, boxes stop (kept)",
        run=cmd_rm,
        json=True,
    )
    rm.add_argument("username", metavar="USER")

    t = sub.add_parser(
        "token",
        help="your API tokens: list, create, revoke",
        description="Tokens act as you. The owner sees and can revoke everyone's. "
        "A revoked token stops working at once.",
    )
    token = nested(t)
    token.add_parser(
        "ls", help="your tokens (the owner: all), never their secrets", run=cmd_token_ls, json=True
    )
    tc = token.add_parser(
        "create", help="a new token, printed once on stdout", run=cmd_token_create, json=True
    )
    tc.add_argument("name", metavar="NAME", help="what it is for, e.g. ci or laptop")
    tc.add_argument(
        "--expires",
        type=seconds_arg(),
        metavar="DURATION",
        help="stop working after this long, e.g. 12h or 30d (default: until revoked)",
    )
    tc.add_argument(
        "--metrics",
        action="store_true",
        help="one that reads /metrics and nothing else, for a Prometheus scraper (the owner)",
    )
    trm = token.add_parser("rm", help="revoke a token (at once)", run=cmd_token_rm)
    trm.add_argument("token_id", metavar="ID")


def cmd_invite(args: argparse.Namespace) -> int:
    invite = call(args, lambda c: c.invite_member(args.role))
    if args.json:
        emit_json(invite)
        return 0
    print(invite.url)
    note(
        f"one-time link for a new {invite.role}, valid until {invite.expires_at:%Y-%m-%d %H:%M} UTC"
    )
    return 0


_NONE = -1  # "none" on the command line: lift the limit (argparse's None means: not given)


def _limit(kind: Callable[[str], float], what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        if text.lower() == "none":
            return _NONE
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (or `none`)")
        return value

    return parse


def _memory(text: str) -> int:
    """MiB: a plain number, or with m/g."""
    return _NONE if text.lower() == "none" else megabytes(text)


def _limits_text(m: Member) -> str:
    lim = m.limits
    parts = [
        f"{lim.max_boxes} boxes" if lim.max_boxes else "",
        f"{lim.max_cpus:g} CPU" if lim.max_cpus else "",
        f"{lim.max_memory_mb} MiB" if lim.max_memory_mb else "",
    ]
    return ", ".join(p for p in parts if p) or "-"


def cmd_limits(args: argparse.Namespace) -> int:
    with client(args) as c:
        name = args.username.strip().lower()
        found = next((m for m in c.list_members() if m.username == name), None)
        if found is None:
            raise NotFound(f"no user {args.username!r} (see `paddock members ls`)")
        now = found.limits

        def pick(given: float | None, current: float | None) -> float | None:
            return current if given is None else None if given == _NONE else given

        boxes = pick(args.max_boxes, now.max_boxes)
        memory = pick(args.max_memory, now.max_memory_mb)
        member = c.set_member_limits(
            found.username,
            max_boxes=int(boxes) if boxes is not None else None,
            max_cpus=pick(args.max_cpus, now.max_cpus),
            max_memory_mb=int(memory) if memory is not None else None,
        )
    return reply(args.json, member, f"{member.username}'s limits: {_limits_text(member)}")


def cmd_ls(args: argparse.Namespace) -> int:
    members = call(args, lambda c: c.list_members())
    return listing(
        members,
        args.json,
        ["USER", "ROLE", "JOINED", "BOXES", "LIMITS"],
        lambda m: [m.username, m.role, since(m.created_at), str(m.boxes), _limits_text(m)],
    )


def cmd_rm(args: argparse.Namespace) -> int:
    done = call(args, lambda c: c.remove_member(args.username))
    if args.json:
        emit_json(done)
        return 0
    stopped = ", ".join(done.boxes_stopped) or "none running"
    note(
        f"{done.username} removed: {done.tokens_revoked} token(s) revoked, boxes stopped: "
        f"{stopped} (their boxes are kept: `paddock ls` shows them)"
    )
    return 0


def cmd_token_ls(args: argparse.Namespace) -> int:
    tokens = call(args, lambda c: c.list_tokens())
    return listing(
        tokens,
        args.json,
        ["ID", "NAME", "USER", "CREATED", "LAST USED", "EXPIRES"],
        lambda t: [
            t.id,
            t.name + (" (metrics only)" if t.scope == "metrics" else ""),
            t.user or "(server)",
            since(t.created_at),
            since(t.last_used_at) if t.last_used_at else "never",
            _expiry(t.expires_at),
        ],
    )


def _expiry(at: datetime | None) -> str:
    if at is None:
        return "never"
    return "expired" if at <= datetime.now(timezone.utc) else until(at)


def cmd_token_create(args: argparse.Namespace) -> int:
    scope = "metrics" if args.metrics else None
    made = call(args, lambda c: c.create_token(args.name, args.expires, scope))
    if args.json:
        emit_json(made)
        return 0
    print(made.token)
    lasts = f"expires {until(made.expires_at)}" if made.expires_at else "valid until revoked"
    if made.scope == "metrics":
        lasts = f"reads /metrics only, {lasts}"
    note(
        f"token {made.id} ({made.name}), {lasts}: shown this once; "
        f"`paddock token rm {made.id}` revokes it"
    )
    return 0


def cmd_token_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_token(args.token_id))
    note(f"token {args.token_id} revoked")
    return 0
