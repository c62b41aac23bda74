"""`paddock template ...`: boxes that start with your project's tools already in them."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ._common import UsageError, box_ref, call, client, examples, nested, pairs, seconds_arg
from ._output import ProgressLine, binary_size, listing, note, reply, since

if TYPE_CHECKING:
    from .._client import Client
    from ..wire.models import Template


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "template",
        help="templates: boxes that start with your tools already in them",
        description="A template is a box's files to start new boxes from: built from a "
        "Dockerfile (FROM paddock-box, or one of your templates) whose steps run in a build "
        "box of yours, with a box's isolation, limits and disk, under the network policy you "
        "give it; or taken from a box you prepared. `paddock new --template NAME` makes a box "
        "from it in the time a fork takes, and what the template adds is stored once.",
        epilog=examples(
            "paddock template build node-tools .",
            "paddock template build py312 -f docker/Dockerfile --network deny-all .",
            "paddock template create prepared --from current",
            "paddock new --template node-tools",
            "paddock template ls",
            "paddock template rebuild --all",
        ),
    )
    tpl = nested(p, default="ls")
    b = tpl.add_parser(
        "build",
        help="build a template from a Dockerfile",
        description="Build a template: the context folder (default .) goes to the server as "
        "a tar (.dockerignore honoured), and the Dockerfile's steps run in a build box of "
        "yours: RUN as a command there, COPY from the context, ENV, ARG, WORKDIR and USER for "
        "the steps after them and for boxes made from the template, CMD as the command those "
        "boxes start at each boot. The log streams here; Ctrl-C leaves the build running "
        "(`paddock template logs NAME`).",
        intermixed=True,
        run=cmd_build,
    )
    b.add_argument("name", metavar="NAME")
    b.add_argument("context", nargs="?", default=".", metavar="CONTEXT")
    b.add_argument("-f", "--file", metavar="DOCKERFILE", help="default: CONTEXT/Dockerfile")
    b.add_argument(
        "--from",
        dest="base",
        metavar="TEMPLATE",
        help="build on this template of yours, whatever the Dockerfile's FROM says",
    )
    b.add_argument(
        "--build-arg", action="append", default=[], metavar="NAME=VALUE", help="an ARG's value"
    )
    b.add_argument("--type", dest="box_type", help="the build box's type (default: the server's)")
    b.add_argument("--network", choices=["allow-all", "deny-all"], help="the build box's egress")
    b.add_argument(
        "--allow", action="append", default=[], metavar="TARGET", help="an allowlist instead"
    )
    b.add_argument(
        "--timeout",
        type=seconds_arg("timeout"),
        default=None,
        help="how long the build may take (default 30m; at most 3h)",
    )
    _add_gives(b)
    b.add_argument("-d", "--detach", action="store_true", help="start it and return")
    c = tpl.add_parser(
        "create",
        help="a template of a box's files",
        description="A template of a box's files as they are now, or as one of its snapshots "
        "keeps them (BOX:SNAPSHOT): files only, as snapshots are.",
        run=cmd_create,
        json=True,
    )
    c.add_argument("name", metavar="NAME")
    c.add_argument("--from", dest="source", required=True, metavar="BOX[:SNAPSHOT]")
    _add_gives(c)
    tpl.add_parser(
        "ls",
        help="your templates (the default)",
        description="Your templates "
        "and the shared ones: status, size, what they build on, if stale.",
        run=cmd_ls,
        json=True,
    )
    show = tpl.add_parser(
        "show", help="a template", description="A template, all of it.", run=cmd_show, json=True
    )
    show.add_argument("name", metavar="NAME")
    logs = tpl.add_parser(
        "logs",
        help="a template's last build log",
        description="The last build's log; with --follow, live until it ends.",
        run=cmd_logs,
    )
    logs.add_argument("name", metavar="NAME")
    logs.add_argument("-f", "--follow", action="store_true")
    rb = tpl.add_parser(
        "rebuild",
        help="build again on today's box image",
        description="Build a template again from its Dockerfile and context (kept by the "
        "server), on today's box image: for templates marked stale after the box image or "
        "their base changed. --all: every stale template of yours.",
        run=cmd_rebuild,
    )
    rb.add_argument("name", nargs="?", metavar="NAME")
    rb.add_argument("--all", action="store_true", help="every stale template of yours")
    for verb, shared in (("share", True), ("unshare", False)):
        s = tpl.add_parser(
            verb,
            help=f"{'share' if shared else 'stop sharing'} a template with everyone (owner)",
            description="The server's owner shares templates with every member, who can make "
            "boxes from them (not change or delete them).",
        )
        s.add_argument("name", metavar="NAME")
        s.set_defaults(run=cmd_share, shared=shared)
    rm = tpl.add_parser(
        "rm",
        help="delete a template",
        description="Delete one of your templates; boxes made from it keep their files.",
        run=cmd_rm,
    )
    rm.add_argument("name", metavar="NAME")


def _add_gives(p: argparse.ArgumentParser) -> None:
    """What boxes made from the template get."""
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="in every box made from it")  # fmt: skip
    p.add_argument("--start-cmd", metavar="COMMAND", help="run at each boot of those boxes")
    p.add_argument("--default-type", metavar="TYPE", help="their type unless `new` says")
    p.add_argument("--default-ttl", type=seconds_arg("TTL", zero="no limit"), metavar="TTL")
    p.add_argument("--default-network", choices=["allow-all", "deny-all"])
    p.add_argument("--default-drive", action="append", default=[], metavar="NAME[:ro]")


def _defaults(args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "type": args.default_type,
        "ttl": args.default_ttl,
        "network": args.default_network,
        "drives": args.default_drive or None,
    }
    return {k: v for k, v in given.items() if v is not None}


def cmd_build(args: argparse.Namespace) -> int:
    progress = ProgressLine("sending the context")
    with client(args) as c:
        t = c.build_template(
            args.name,
            args.context,
            dockerfile=args.file,
            base=args.base,
            build_args=pairs(args.build_arg, "--build-arg"),
            box_type=args.box_type,
            network="allowlist" if args.allow else args.network,
            allow=args.allow,
            timeout=args.timeout,
            env=pairs(args.env),
            start_cmd=args.start_cmd,
            defaults=_defaults(args),
            progress=progress,
        )
        progress.finish()
        if args.detach:
            note(f"building template {t.name}: paddock template logs {t.name} --follow")
            return 0
        return _follow(c, t.name)


def _follow(c: Client, name: str, live: bool = True) -> int:
    status = "building"
    for event in c.follow_template_build(name, live=live):
        if "stream" in event:
            out = sys.stdout if event["stream"] == "stdout" else sys.stderr
            out.write(str(event["data"]))
            out.flush()
        elif "status" in event:
            status = str(event["status"])
            note(str(event.get("message", status)))
    return 0 if status in ("ready", "building") else 1


def cmd_create(args: argparse.Namespace) -> int:
    box, _, snapshot = args.source.partition(":")
    t = call(
        args,
        lambda c: c.create_template(
            args.name,
            box_ref(box),
            snapshot=snapshot or None,
            env=pairs(args.env),
            start_cmd=args.start_cmd,
            defaults=_defaults(args),
        ),
    )
    return reply(
        args.json,
        t,
        f"template {t.name}: the files of {args.source} ({binary_size(t.size_bytes)} of its own)",
    )


def cmd_ls(args: argparse.Namespace) -> int:
    rows = call(args, lambda c: c.list_templates())
    return listing(
        rows,
        args.json,
        ["NAME", "STATUS", "BASE", "SIZE", "BUILT", "OWNER"],
        lambda t: [
            t.name + (" (shared)" if t.shared else ""),
            "stale" if t.stale else t.status,
            t.base,
            binary_size(t.size_bytes),
            since(t.built_at) if t.built_at else "-",
            t.owner,
        ],
        "no templates yet: `paddock template build NAME .` or `template create --from BOX`",
    )


def cmd_show(args: argparse.Namespace) -> int:
    t = call(args, lambda c: c.get_template(args.name))
    return reply(args.json, t, lambda: _describe(t))


def _describe(t: Template) -> None:
    d = t.defaults
    rows = [
        ("name", t.name),
        ("status", t.status + (f": {t.message}" if t.message else "")),
        ("stale", t.stale or "no"),
        ("from", f"{t.base} ({t.source})"),
        ("size", f"{binary_size(t.size_bytes)} of its own"),
        ("owner", t.owner + (" (shared with everyone)" if t.shared else "")),
        ("env", ", ".join(t.env) or "-"),
        ("user, folder", f"{t.user or 'abc'}, {t.workdir or '/config'}"),
        ("start command", t.start_cmd or "-"),
        (
            "defaults",
            ", ".join(f"{k} {v}" for k, v in d.__dict__.items() if v not in (None, [])) or "-",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def cmd_logs(args: argparse.Namespace) -> int:
    return call(args, lambda c: _follow(c, args.name, live=args.follow))


def cmd_rebuild(args: argparse.Namespace) -> int:
    if bool(args.name) == bool(args.all):
        raise UsageError("name a template, or --all for every stale one of yours")
    with client(args) as c:
        names = (
            [args.name] if args.name else [t.name for t in c.list_templates() if t.mine and t.stale]
        )
        if not names:
            note("no stale templates of yours")
            return 0
        failed = 0
        for name in names:
            c.rebuild_template(name)
            failed += _follow(c, name)
    return 1 if failed else 0


def cmd_share(args: argparse.Namespace) -> int:
    t = call(args, lambda c: c.share_template(args.name, args.shared))
    note(f"template {t.name} is {'shared with everyone' if t.shared else 'yours alone'}")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_template(args.name))
    note(f"template {args.name} deleted (boxes made from it keep their files)")
    return 0
