"""Preview URLs: `paddock host BOX PORT`, `paddock host ls [BOX]`, `paddock host rm ID`."""

from __future__ import annotations

import argparse

from ._common import UsageError, box_ref, call, examples, seconds_arg
from ._output import emit_json, note, table, until


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "host",
        help="a URL for a web server in a box (preview URLs)",
        usage="paddock host BOX PORT [--public] [--ttl DURATION] [--json]\n"
        "       paddock host ls [BOX] [--json]\n"
        "       paddock host rm ID",
        description="Print a URL that reaches the web server listening on PORT inside the box "
        "(on its 0.0.0.0 or 127.0.0.1). On a server with a hostname it is "
        "https://PORT-BOXID.HOSTNAME/, else http://SERVER/preview/BOXID/PORT/. Private unless "
        "--public: the URL carries a secret, which a browser trades for a cookie on first use. "
        "Opening it while the box is stopped starts the box. Asking again for the same port "
        "gives a new URL; the old one stops working.",
        epilog=examples(
            "paddock host current 3000",
            "paddock host current 8080 --public --ttl 2h",
            "paddock host ls",
            "paddock host ls current --json",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        run=cmd_host,
        json=True,
    )
    p.add_argument("words", nargs="+", metavar="BOX PORT | ls [BOX] | rm ID")
    p.add_argument("--public", action="store_true", help="open to anyone with the URL")
    p.add_argument(
        "--ttl",
        type=seconds_arg("TTL", " (0: until removed)"),
        metavar="DURATION",
        help="end it after this long, e.g. 2h (default: until removed)",
    )


def cmd_host(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    if words[0] == "ls" and len(words) <= 2:
        return _ls(args, box_ref(words[1]) if len(words) == 2 else None)
    if words[0] == "rm" and len(words) == 2:
        call(args, lambda c: c.delete_preview(words[1]))
        note(f"preview {words[1]} removed: its URL no longer works")
        return 0
    if len(words) != 2 or not words[1].isdigit():
        raise UsageError(
            "give BOX PORT (a number), `ls [BOX]` or `rm ID`: see `paddock host --help`"
        )
    preview = call(
        args, lambda c: c.create_preview(box_ref(words[0]), int(words[1]), args.public, args.ttl)
    )
    if args.json:
        emit_json(preview)
        return 0
    print(preview.url)
    who = "anyone with the URL" if preview.public else "holders of this URL and the box's owner"
    lasts = f", until it ends {until(preview.expires_at)}" if preview.expires_at else ""
    note(f"preview {preview.id}: port {preview.port} of box {preview.box}, for {who}{lasts}")
    return 0


def _ls(args: argparse.Namespace, box: str | None) -> int:
    previews = call(args, lambda c: c.list_previews(box))
    if args.json:
        emit_json(previews)
        return 0
    table(
        ["ID", "BOX", "PORT", "ACCESS", "ENDS", "URL"],
        [
            [
                p.id,
                p.box,
                str(p.port),
                "public" if p.public else "private",
                until(p.expires_at) if p.expires_at else "-",
                p.url,
            ]
            for p in previews
        ],
    )
    if not previews:
        note("no previews: `paddock host BOX PORT` makes one")
    return 0
