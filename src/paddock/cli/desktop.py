"""`paddock desktop ...` and `paddock screenshot`: the box's desktop in a browser, a PNG of
it, and computer-use input (click, type, key)."""

from __future__ import annotations

import argparse
import sys
import webbrowser
from datetime import datetime
from pathlib import Path

from ._common import UsageError, box_ref, call, client, examples
from ._output import emit_json, note

USAGE = """paddock desktop BOX [--print-url] [--view-only] [--size WxH] [--json]
       paddock desktop BOX click X Y [--button N]
       paddock desktop BOX type TEXT
       paddock desktop BOX key COMBO"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "desktop",
        help="open a box's desktop in the browser; click, type, press keys on it",
        usage=USAGE,
        description="Every box has an XFCE desktop, started on first use. `paddock desktop "
        "BOX` opens it in your browser through the server (noVNC); the link carries a "
        "short-lived token for this box only. Resizing the browser resizes the desktop. "
        "For agents: click, type and key act on the desktop without a browser; look with "
        "`paddock screenshot`.",
        epilog=examples(
            "paddock desktop current",
            "paddock desktop current --print-url --view-only",
            "paddock desktop current click 640 400",
            "paddock desktop current type 'hello world'",
            "paddock desktop current key ctrl+s",
        ),
        run=cmd_desktop,
        box="one",
        json=True,
    )
    p.add_argument("action", nargs="?", choices=["click", "type", "key"], help="an input action")
    p.add_argument("args", nargs="*", metavar="ARG", help="click: X Y; type: TEXT; key: COMBO")
    p.add_argument("--button", type=int, default=1, help="click: 1 left, 2 middle, 3 right")
    p.add_argument("--print-url", action="store_true", help="print the link, open no browser")
    p.add_argument("--view-only", action="store_true", help="a watch-only link")
    p.add_argument("--size", metavar="WxH", help="set the desktop's size, e.g. 1920x1080")

    p = sub.add_parser(
        "screenshot",
        help="save a PNG of a box's desktop",
        description="Save a PNG of the box's desktop (started first if need be).",
        epilog=examples(
            "paddock screenshot current",
            "paddock screenshot current -o app.png --size 1280x800",
            "paddock screenshot current -o - | display",
        ),
        run=cmd_screenshot,
        box="one",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="where (default BOX-TIME.png; - for stdout)"
    )
    p.add_argument("--size", metavar="WxH", help="resize the desktop first, e.g. 1280x800")


def cmd_desktop(args: argparse.Namespace) -> int:
    ref = box_ref(args.box)
    with client(args) as c:
        if args.action == "click":
            if len(args.args) != 2 or not all(a.isdigit() for a in args.args):
                raise UsageError("usage: paddock desktop BOX click X Y (pixels)")
            c.desktop_click(ref, int(args.args[0]), int(args.args[1]), button=args.button)
            return 0
        if args.action in ("type", "key"):
            if len(args.args) != 1:
                what = "TEXT" if args.action == "type" else "COMBO"
                raise UsageError(f"usage: paddock desktop BOX {args.action} {what}")
            if args.action == "type":
                c.desktop_type(ref, args.args[0])
            else:
                c.desktop_key(ref, args.args[0])
            return 0
        if args.args:
            raise UsageError(f"unexpected arguments: {' '.join(args.args)}")
        link = c.desktop_link(ref, view_only=args.view_only, size=args.size)
    if args.json:
        emit_json(link)
        return 0
    if args.print_url or not _open_browser(link.url):
        print(link.url)
    note(
        f"link valid until {link.expires_at:%H:%M:%S %Z}"
        + (" (view only)" if link.view_only else "")
    )
    return 0


def _open_browser(url: str) -> bool:
    """A graphical browser only: on a server over SSH, a text browser taking over the
    terminal is worse than printing the link."""
    import os

    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def cmd_screenshot(args: argparse.Namespace) -> int:
    ref = box_ref(args.box)
    out = Path(args.output or f"{ref}-{datetime.now():%Y%m%d-%H%M%S}.png")
    if args.output != "-" and not out.absolute().parent.is_dir():
        # Said before the desktop is started for a picture that could not be saved.
        raise FileNotFoundError(2, "no such folder", str(out.absolute().parent))
    png = call(args, lambda c: c.screenshot(ref, size=args.size))
    if args.output == "-":
        sys.stdout.buffer.write(png)
        return 0
    out.write_bytes(png)
    note(f"saved {out} ({len(png) // 1024} KiB)")
    return 0
