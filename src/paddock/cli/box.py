"""Box lifecycle commands: new, ls, show, use, stop, resume, rm, extend, types."""

from __future__ import annotations

import argparse
import sys

from .._config import ClientConfig
from ..wire.errors import AuthenticationFailed, ConnectionFailed, InvalidRequest, PaddockError
from ._common import (
    EXIT_ERROR,
    UsageError,
    box_ref,
    call,
    client,
    examples,
    seconds_arg,
    set_current,
)
from ._output import duration, emit_json, note, since, table, until

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .._client import Client
    from ..wire.models import Box


_ttl = seconds_arg("TTL", " (0: no limit)")


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "new",
        help="create and start a box (it becomes `current`)",
        description="Create and start a box, print its name, and make it the current box.",
        epilog=examples(
            "paddock new --type small --ttl 3600",
            "paddock new --name api-tests --ttl 2h --ttl-action delete",
        ),
        run=cmd_new,
        json=True,
    )
    p.add_argument("--type", dest="box_type", metavar="TYPE", help="box type (see `paddock types`)")
    p.add_argument(
        "--ttl",
        type=_ttl,
        metavar="SECONDS",
        help="stop the box after this long (0: never); also 90m, 2h, 1d",
    )
    p.add_argument(
        "--idle-stop",
        type=seconds_arg("idle stop", " (0: never)"),
        metavar="DURATION",
        help="stop the box once unused this long (no exec, terminal, desktop viewer, agent "
        "run or preview traffic), e.g. 30m; default: the server's",
    )
    p.add_argument(
        "--ttl-action",
        choices=["stop", "delete"],
        help="what the TTL does (default: stop, snapshot kept)",
    )
    p.add_argument(
        "--keep",
        type=_count,
        metavar="N",
        help="keep the newest N stop snapshots (each stop takes one); default: the "
        "server's snapshot_retention",
    )
    p.add_argument(
        "--name", help="box name (lowercase letters, digits, hyphens); generated if absent"
    )
    p.add_argument(
        "--drive",
        action="append",
        default=[],
        metavar="NAME[@PATH][:ro]",
        help="mount a named drive at /mnt/NAME, or at PATH (created if missing; repeatable)",
    )
    p.add_argument(
        "--network", choices=["allow-all", "deny-all"], help="egress policy (default allow-all)"
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="TARGET",
        help="allow only these IPv4 addresses/CIDRs, domains or *.domains out (repeatable; "
        "implies an allowlist)",
    )
    p.add_argument(
        "--auth",
        action="append",
        default=[],
        metavar="PROVIDER",
        help="give the box's commands this provider's API key (see `paddock auth`; repeatable)",
    )
    p.add_argument(
        "--template",
        metavar="NAME",
        help="start from a template's files (see `paddock template`); its defaults fill in "
        "type, TTL, network and drives not given here",
    )
    p.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="attach your secret NAME: $NAME in the box holds its placeholder (see "
        "`paddock secret`; repeatable)",
    )
    p.add_argument(
        "--agent", help="the box's default agent for `paddock prompt` (default: the server's)"
    )

    p = sub.add_parser(
        "ls",
        help="list boxes",
        description="List boxes; * marks the current one.",
        run=cmd_ls,
        json=True,
    )
    p.add_argument("-q", "--quiet", action="store_true", help="only names, one per line")
    p.add_argument("--mine", action="store_true", help="only your own boxes (for the owner)")

    p = sub.add_parser(
        "show",
        help="show one box",
        description="Show a box by name, id prefix or `current`.",
        run=cmd_show,
        box="one",
        json=True,
    )

    p = sub.add_parser(
        "use",
        help="make a box the current one",
        description="Make BOX the current box: the one `current` stands for in every command.",
        run=cmd_use,
        box="one",
    )

    p = sub.add_parser(
        "stop",
        help="stop boxes and snapshot their files",
        description="Stop one or more boxes. A box's files (all of its filesystem) are kept "
        "in a snapshot; running processes and memory are not. `paddock resume` brings it "
        "back. Each box is reported; the exit code is 1 if any could not be stopped.",
        run=cmd_stop,
        box="some",
        json=True,
    )

    p = sub.add_parser(
        "resume",
        help="start stopped boxes again (files as they were)",
        description="Start one or more stopped boxes again, with their files as they were "
        "(processes start fresh; the TTL clock starts again). A running box is left as it is. "
        "Each box is reported; the exit code is 1 if any could not be resumed.",
        run=cmd_resume,
        box="some",
        json=True,
    )

    p = sub.add_parser(
        "rm",
        help="delete boxes, their files and snapshots",
        description="Delete one or more boxes with their files and snapshots. A running box "
        "needs --force. Pull what you need first (`paddock pull`). Each box is reported; the "
        "exit code is 1 if any could not be deleted.",
        run=cmd_rm,
        box="some",
    )
    p.add_argument("-f", "--force", action="store_true", help="delete even if it is running")

    p = sub.add_parser(
        "extend",
        help="give a box a new TTL, counted from now",
        description="Give a box a new TTL counted from now (0: no limit); a stopped box's "
        "clock starts when it resumes.",
        run=cmd_extend,
        box="one",
        json=True,
    )
    p.add_argument(
        "--ttl",
        type=_ttl,
        required=True,
        metavar="SECONDS",
        help="new TTL (0: never); also 90m, 2h",
    )

    p = sub.add_parser(
        "logs",
        help="what a box's init and services wrote, or with --server paddockd's own log",
        description="Print the box's own output: its init and the services it keeps running "
        "(Docker inside the box, the desktop). A command's output is not here: `paddock "
        "exec` streams it, and `exec -d` writes it to the file it names. With --server "
        "(the server owner): paddockd's last messages, wherever its log goes (the file or "
        "the journal), secrets masked.",
        epilog=examples(
            "paddock logs -n 50",
            "paddock logs --server",
            "paddock logs --server -n 500 --json",
        ),
        run=cmd_logs,
        json=True,
    )
    p.add_argument("box", metavar="BOX", nargs="?", help="default: the current box")
    p.add_argument(
        "-n", "--tail", type=_count, default=0, metavar="N", help="only the last N lines"
    )
    p.add_argument("--server", action="store_true", help="paddockd's own log (owner)")

    p = sub.add_parser(
        "types",
        help="list box types and their limits",
        description="The box types this server offers: CPUs, memory, processes, and what each "
        "is for (`paddock new --type TYPE`).",
        run=cmd_types,
        json=True,
    )


def _print_box(box: Box, as_json: bool) -> None:
    if as_json:
        emit_json(box)
        return
    rows = [
        ("name", box.name),
        ("id", box.id),
        ("state", box.state),
        ("type", box.type),
        ("created", since(box.created_at)),
        ("expires", _expiry(box)),
        ("ttl", duration(box.ttl) if box.ttl else "none"),
        ("snapshots", str(box.snapshots) + (f" (keeps {box.keep} from stops)" if box.keep else "")),
        ("profile", box.profile),
        ("image", box.image),
    ]
    if box.message:
        rows.append(("note", box.message))
    for key, value in rows:
        print(f"{key + ':':<11}{value}")


def _expiry(box: Box) -> str:
    if box.expires_at:
        return f"{until(box.expires_at)} ({box.ttl_action})"
    if box.ttl and box.state != "running":
        # The clock runs only while the box does: it starts again on `resume`.
        return f"{duration(box.ttl)} after it resumes ({box.ttl_action})"
    return "never"


def cmd_new(args: argparse.Namespace) -> int:
    with client(args) as c:
        if args.auth:  # checked before anything is created
            configured = {r.provider for r in c.list_credentials() if r.configured}
            missing = [p for p in args.auth if p not in configured]
            if missing:
                raise InvalidRequest(
                    f"no API key set for {', '.join(missing)}: run `paddock auth set {missing[0]}`"
                )
        box = c.create_box(
            args.name,
            box_type=args.box_type,
            ttl=args.ttl,
            ttl_action=args.ttl_action,
            drives=args.drive,
            network="allowlist" if args.allow else args.network,
            allow=args.allow,
            agent=args.agent,
            idle_stop=args.idle_stop,
            keep=args.keep,
            secrets=args.secret,
            template=args.template,
        )
        for provider in args.auth:
            c.attach_credential(box.name, provider)
    set_current(box.name)
    if args.json:
        emit_json(box)
    else:
        print(box.name)
        lifetime = (
            f"{args.ttl_action or box.ttl_action}s {until(box.expires_at)}"
            if box.expires_at
            else "no TTL"
        )
        note(f"box {box.name} is running ({box.type}, {lifetime}); it is now the current box")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    boxes = call(args, lambda c: c.list_boxes())
    if args.mine:
        boxes = [b for b in boxes if b.mine]
    if args.json:
        emit_json(boxes)
        return 0
    if args.quiet:  # for scripts: `paddock rm -f $(paddock ls -q)`
        for b in boxes:
            print(b.name)
        return 0
    current = ClientConfig.load().current
    rows = [
        [
            ("* " if b.name == current else "  ") + b.name,
            b.id,
            b.state,
            b.type,
            since(b.created_at),
            until(b.expires_at) if b.expires_at else "-",
        ]
        for b in boxes
    ]
    headers = ["  NAME", "ID", "STATE", "TYPE", "CREATED", "EXPIRES"]
    # Only the owner is shown others' boxes: then whose each is matters.
    if any(not b.mine for b in boxes):
        headers.append("OWNER")
        for row, b in zip(rows, boxes, strict=True):
            row.append(b.owner or "-")
    table(headers, rows)
    if not boxes:
        note("no boxes yet: create one with `paddock new`")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    call(args, lambda c: _print_box(c.get_box(box_ref(args.box)), args.json))
    return 0


def cmd_use(args: argparse.Namespace) -> int:
    box = call(args, lambda c: c.get_box(box_ref(args.box)))
    set_current(box.name)
    note(f"current box: {box.name}")
    return 0


def _each(args: argparse.Namespace, act: Callable[[Client, str], Box | None]) -> int:
    """`act` on each BOX in turn, as `docker stop A B` does: each reports for itself, one
    failure does not keep the others from their turn, and the exit code says if any failed.
    With --json: the box (one BOX) or a list of those that succeeded (several)."""
    done: list[Box] = []
    failed = False
    with client(args) as c:
        for ref in args.boxes:
            try:
                box = act(c, box_ref(ref))
            except (ConnectionFailed, AuthenticationFailed):
                raise  # the next box would fail the same way
            except PaddockError as exc:
                print(f"paddock: {exc.message}", file=sys.stderr)
                failed = True
                continue
            if box is not None:
                done.append(box)
    if getattr(args, "json", False) and (done or len(args.boxes) > 1):
        emit_json(done if len(args.boxes) > 1 else done[0])
    return EXIT_ERROR if failed else 0


def cmd_stop(args: argparse.Namespace) -> int:
    def stop(c: Client, ref: str) -> Box:
        before = c.get_box(ref)
        was_stopped = before.state == "stopped"
        box = before if was_stopped else c.stop_box(before.id)
        if not args.json:
            saved = _saved_in(c, box)
            status = "was already stopped" if was_stopped else "stopped"
            keeps = f"; {saved} keeps its files" if saved else ""
            note(f"box {box.name} {status}{keeps} (`paddock resume {box.name}`)")
        return box

    return _each(args, stop)


def _saved_in(c: Client, box: Box) -> str | None:
    """The snapshot the box's files were last saved to, as `snapshot ID (LABEL)`."""
    snap = next((s for s in c.list_snapshots(box.id) if s.current), None)
    if snap is None:
        return None
    return f"snapshot {snap.id}" + (f" ({snap.label})" if snap.label else "")


def cmd_resume(args: argparse.Namespace) -> int:
    def resume(c: Client, ref: str) -> Box:
        before = c.get_box(ref)
        # Resuming a running box would only restart its TTL clock: say so, change nothing.
        if before.state == "running":
            if not args.json:
                note(f"box {before.name} is already running")
            return before
        box = c.resume_box(before.id)
        if not args.json:
            note(f"box {box.name} is running" + (f" ({box.message})" if box.message else ""))
        return box

    return _each(args, resume)


def _hex(ref: str) -> bool:
    """Whether `ref` may be an id or id prefix (a name never is hex digits alone)."""
    return all(ch in "0123456789abcdef" for ch in ref)


def cmd_rm(args: argparse.Namespace) -> int:
    current = ClientConfig.load().current

    def rm(c: Client, ref: str) -> None:
        # A name is enough to delete by (one request); an id or prefix is looked up first,
        # for the name to report and to know whether it was the current box.
        name = c.get_box(ref).name if _hex(ref) else ref
        c.delete_box(name, force=args.force)
        if name == current:
            set_current(None)
        note(f"box {name} deleted")

    return _each(args, rm)


def cmd_extend(args: argparse.Namespace) -> int:
    box = call(args, lambda c: c.extend_box(box_ref(args.box), args.ttl))
    if args.json:
        emit_json(box)
    else:
        note(
            f"box {box.name} now expires {until(box.expires_at)}"
            if box.expires_at
            else f"box {box.name} has no TTL now"
        )
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    if args.server:
        if args.box:
            raise UsageError("--server prints paddockd's log: name no box with it")
        return _server_log(args)
    text = call(args, lambda c: c.box_logs(box_ref(args.box or "current"), tail=args.tail))
    if args.json:
        emit_json({"log": text})
        return 0
    sys.stdout.write(text)
    if not text:
        note("nothing yet: the box's init and services have written nothing")
    return 0


def _server_log(args: argparse.Namespace) -> int:
    lines = call(args, lambda c: c.server_log(lines=min(args.tail or 100, 2000)))
    if args.json:
        emit_json(lines)
        return 0
    for line in lines:
        stamp = line.at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{stamp} {line.level} {line.logger}: {line.message}")
    if not lines:
        note("nothing since paddockd started")
    return 0


def cmd_types(args: argparse.Namespace) -> int:
    types = call(args, lambda c: c.box_types())
    if args.json:
        emit_json(types)
        return 0
    rows = [
        [
            t.name + (" (default)" if t.name == types.default else ""),
            f"{t.cpus:g}",
            f"{t.memory_mb} MiB",
            f"{t.disk_mb // 1024} GiB" if t.disk_mb else "-",
            str(t.pids),
            t.description,
        ]
        for t in types.types
    ]
    # DISK applies where the server enforces sizes: `paddock status` says whether it does.
    table(["TYPE", "CPUS", "MEMORY", "DISK", "PIDS", "FOR"], rows)
    return 0
