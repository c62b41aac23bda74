"""People and tokens: `paddock members invite|ls|rm` (the owner) and `paddock token
ls|create|rm` (everyone, for their own tokens)."""

from __future__ import annotations

import argparse

from ._common import add_json, client, nested
from ._output import emit_json, note, since, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "members",
        help="invite people to this server, list and remove them (the owner)",
        description="A member sees and acts on only their own boxes; the owner, on all. "
        "An invitation is a one-time link, valid 7 days.",
    )
    members = nested(p)
    inv = members.add_parser("invite", help="print a one-time link that creates an account")
    inv.add_argument("--role", choices=["member", "owner"], default="member")
    add_json(inv)
    inv.set_defaults(run=cmd_invite)
    ls = members.add_parser("ls", help="everyone with an account")
    add_json(ls)
    ls.set_defaults(run=cmd_ls)
    rm = members.add_parser(
        "rm", help="remove an account: sessions end, tokens are revoked, boxes stop (kept)"
    )
    rm.add_argument("username", metavar="USER")
    add_json(rm)
    rm.set_defaults(run=cmd_rm)

    t = sub.add_parser(
        "token",
        help="your API tokens: list, create, revoke",
        description="Tokens act as you. The owner sees and can revoke everyone's. "
        "A revoked token stops working at once.",
    )
    token = nested(t)
    tls = token.add_parser("ls", help="your tokens (the owner: all), never their secrets")
    add_json(tls)
    tls.set_defaults(run=cmd_token_ls)
    tc = token.add_parser("create", help="a new token, printed once on stdout")
    tc.add_argument("name", metavar="NAME", help="what it is for, e.g. ci or laptop")
    add_json(tc)
    tc.set_defaults(run=cmd_token_create)
    trm = token.add_parser("rm", help="revoke a token (at once)")
    trm.add_argument("token_id", metavar="ID")
    trm.set_defaults(run=cmd_token_rm)


def cmd_invite(args: argparse.Namespace) -> int:
    with client(args) as c:
        invite = c.invite_member(args.role)
    if args.json:
        emit_json(invite)
        return 0
    print(invite.url)
    note(
        f"one-time link for a new {invite.role}, valid until {invite.expires_at:%Y-%m-%d %H:%M} UTC"
    )
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with client(args) as c:
        members = c.list_members()
    if args.json:
        emit_json(members)
        return 0
    table(
        ["USER", "ROLE", "JOINED", "BOXES"],
        [[m.username, m.role, since(m.created_at), str(m.boxes)] for m in members],
    )
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    with client(args) as c:
        done = c.remove_member(args.username)
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
    with client(args) as c:
        tokens = c.list_tokens()
    if args.json:
        emit_json(tokens)
        return 0
    table(
        ["ID", "NAME", "USER", "CREATED", "LAST USED"],
        [
            [
                t.id,
                t.name,
                t.user or "(server)",
                since(t.created_at),
                since(t.last_used_at) if t.last_used_at else "never",
            ]
            for t in tokens
        ],
    )
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    with client(args) as c:
        made = c.create_token(args.name)
    if args.json:
        emit_json(made)
        return 0
    print(made.token)
    note(f"token {made.id} ({made.name}): shown this once; `paddock token rm {made.id}` revokes it")
    return 0


def cmd_token_rm(args: argparse.Namespace) -> int:
    with client(args) as c:
        c.delete_token(args.token_id)
    note(f"token {args.token_id} revoked")
    return 0
