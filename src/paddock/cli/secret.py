"""`paddock secret ...`: your own secrets (tokens for GitHub, npm, a private registry),
bound to hosts. A box holds a placeholder in `$NAME`; the server's credential gateway puts
the value in its place only in HTTPS requests to those hosts, so the value never exists in
the box."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._common import UsageError, add_json, box_ref, call, examples, nested
from ._output import emit_json, listing, note, reply, since, table

if TYPE_CHECKING:
    from ..wire.models import CredentialUse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "secret",
        help="your secrets, bound to hosts: boxes get placeholders, never the values",
        description="A secret is a value (a token) bound to one or more hosts. A box it is "
        "attached to holds a placeholder in $NAME; an HTTPS request from the box to a bound "
        "host that carries the placeholder in a header (Authorization, a token header, or "
        "a password in Basic credentials, as git, npm and pip send one) leaves with the value "
        "in its place. Requests to any other host keep the placeholder. The value is read "
        "from a prompt or stdin, stored encrypted, and never shown again. Anything in the box "
        "can still *use* an attached secret with the bound hosts: `paddock secret log` shows "
        "every use.",
        epilog=examples(
            "paddock secret set GITHUB_TOKEN --host api.github.com --host github.com",
            "paddock secret set NPM_TOKEN --from-stdin --host registry.npmjs.org < t",
            "paddock secret set API_KEY --host api.example.com --header X-Api-Key",
            "paddock secret attach current GITHUB_TOKEN",
            "paddock new --secret GITHUB_TOKEN",
            "paddock secret log --box current",
        ),
    )
    secret = nested(p)
    s = secret.add_parser(
        "set",
        help="store a secret bound to hosts (its value from a prompt or stdin)",
        description="Store a secret on the server, encrypted, bound to the hosts given. Its value "
        "is read from a hidden prompt, or from stdin with --from-stdin; never from the command "
        "line. Setting an existing secret without a new value (--keep-value) changes its hosts.",
        run=cmd_set,
        json=True,
    )
    s.add_argument("name", metavar="NAME", help="the box's variable, e.g. GITHUB_TOKEN")
    s.add_argument(
        "--host",
        action="append",
        default=[],
        required=True,
        metavar="HOST",
        help="a host it is used for (api.github.com, *.example.com; repeatable)",
    )
    s.add_argument(
        "--header",
        metavar="NAME",
        help="set this header whole (with --format) when a request carries the placeholder",
    )
    s.add_argument("--format", metavar="TEXT", help="the header's value, {value} for the secret")
    s.add_argument("--from-stdin", action="store_true", help="read the value from stdin")
    s.add_argument(
        "--keep-value", action="store_true", help="keep the stored value (change the hosts)"
    )
    secret.add_parser(
        "ls",
        help="your secrets",
        description="Your secrets: hosts, boxes, last use.",
        run=cmd_ls,
        json=True,
    )
    rm = secret.add_parser(
        "rm",
        help="remove a secret (and detach it from every box)",
        description="Remove a secret from the server; the boxes it was attached to lose it "
        "(their placeholders are refused from then on).",
        run=cmd_rm,
    )
    rm.add_argument("name", metavar="NAME")
    add_attachments(secret, "secret", "NAME", "its placeholder ($NAME in its commands)")
    log = secret.add_parser(
        "log",
        help="what your secrets were used for",
        description="Each request a box made with one of your secrets through the credential "
        "gateway, newest first: the box, the host, the request's method and path (never its "
        "query), the host's answer, and refusals (a placeholder sent from another box, to a "
        "host it is not bound to, after it was detached).",
        run=cmd_log,
    )
    log.add_argument("name", metavar="NAME", nargs="?", help="only this secret's")
    add_log_options(log)


def add_attachments(sub: argparse._SubParsersAction, noun: str, metavar: str, gets: str) -> None:  # type: ignore[type-arg]
    """`attach BOX NAME` and `detach BOX NAME` for a key (noun "credential") or a secret."""
    for action, what in (("attach", "give a box"), ("detach", "take from a box")):
        a = sub.add_parser(
            action,
            help=f"{what} your {metavar.lower()}'s {noun}",
            description=f"{what.capitalize()} {gets}, from its next command on.",
            box="one",
        )
        a.add_argument("name", metavar=metavar)
        a.set_defaults(run=cmd_attach, method=f"{action}_{noun}", noun=noun)


def cmd_attach(args: argparse.Namespace) -> int:
    ref = box_ref(args.box)
    attached = call(args, lambda c: getattr(c, args.method)(ref, args.name))
    note(f"box {ref}: {', '.join(attached) or f'no {args.noun}s'} attached")
    return 0


def read_hidden(from_stdin: bool, what: str) -> str:
    """A key or secret value from stdin, or else a hidden prompt: never the command line."""
    if from_stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise UsageError(f"no {what} on stdin")
        return value
    if not sys.stdin.isatty():
        raise UsageError(f"no terminal to ask for the {what} on: pipe it in with --from-stdin")
    import getpass

    return getpass.getpass(f"{what} (input hidden): ").strip()


def add_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--box", metavar="BOX", help="only this box's")
    p.add_argument("-n", "--limit", type=int, default=50, help="how many lines (default 50)")
    add_json(p)


def show_uses(uses: list[CredentialUse], as_json: bool) -> int:
    if as_json:
        emit_json(uses)
        return 0
    if not uses:
        note("no uses yet")
        return 0
    table(
        ["WHEN", "BOX", "NAME", "HOST", "REQUEST", "ANSWER"],
        [
            [
                since(u.at),
                u.box,
                u.name,
                u.host,
                f"{u.method} {u.path}",
                str(u.status) if u.outcome == "used" else f"refused: {u.reason}",
            ]
            for u in uses
        ],
    )
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    value = None if args.keep_value else read_hidden(args.from_stdin, f"value of {args.name}")
    got = call(
        args,
        lambda c: c.set_secret(args.name, args.host, value, header=args.header, format=args.format),
    )
    return reply(args.json, got, f"{got.name}: stored, for {', '.join(got.hosts)}")


def cmd_ls(args: argparse.Namespace) -> int:
    rows = call(args, lambda c: c.list_secrets())
    return listing(
        rows,
        args.json,
        ["NAME", "HOSTS", "HEADER", "BOXES", "LAST USED"],
        lambda r: [
            r.name,
            ",".join(r.hosts),
            f"{r.header}: {r.format}" if r.header else "(in place)",
            ",".join(r.boxes) or "-",
            since(r.last_used_at) if r.last_used_at else "-",
        ],
        "no secrets yet: `paddock secret set NAME --host HOST`",
    )


def cmd_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_secret(args.name))
    note(f"{args.name}: removed (and detached from every box)")
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    uses = call(
        args,
        lambda c: c.secret_log(
            args.name, box=box_ref(args.box) if args.box else None, limit=args.limit
        ),
    )
    return show_uses(uses, args.json)
