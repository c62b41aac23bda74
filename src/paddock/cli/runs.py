"""`paddock prompt` and `paddock runs`: coding agents headless in a box."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ._common import AGENTS, UsageError, box_ref, call, client, examples, nested
from ._output import duration, emit_json, listing, note, since

if TYPE_CHECKING:
    from .._client import Client


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "prompt",
        help="run a coding agent headless in a box",
        description=f"Run a coding agent ({', '.join(AGENTS)}; prime is a one-shot chat) in "
        "the box without a terminal, with only its provider's key (`paddock auth set`), and "
        "stream its output; exit with the agent's exit code. The run goes on if you "
        "disconnect: `paddock runs follow RUN` re-attaches. The instruction is an argument "
        "or stdin.",
        epilog=examples(
            "paddock prompt current 'add a test for the parser and make it pass'",
            "paddock prompt current --agent codex --workdir /config/project < task.md",
            "paddock prompt current --detach 'upgrade the dependencies'",
        ),
        intermixed=True,
        run=cmd_prompt,
        box="one",
    )
    p.add_argument(
        "instruction", nargs="*", metavar="INSTRUCTION", help="its words (default: stdin)"
    )
    p.add_argument(
        "--agent",
        help=f"{', '.join(AGENTS)} (default: the box's, else the server's)",
    )
    p.add_argument("-w", "--workdir", metavar="DIR", help="where the agent works (default /config)")
    p.add_argument("--model", help="the model, in the agent's own naming")
    p.add_argument("--wake", action="store_true", help="start the box first if it is stopped")
    p.add_argument("-d", "--detach", action="store_true", help="print the run id and return")
    p.add_argument(
        "--json", action="store_true", help="stream the agent's structured events (JSON lines)"
    )

    p = sub.add_parser(
        "runs",
        help="a box's agent runs; follow, show or stop one",
        description="List a box's agent runs, or follow (re-attach to), show or stop one:\n"
        "  paddock runs [ls] BOX [--json]\n"
        "  paddock runs follow RUN | show RUN [--json] | stop RUN",
    )
    runs = nested(p, default="ls")
    runs.add_parser(
        "ls",
        help="a box's runs (the default)",
        description="A box's agent runs: agent, status, start, duration, instruction.",
        run=cmd_runs,
        box="one",
        json=True,
    )
    follow = runs.add_parser(
        "follow",
        help="print a run's output so far, then the rest until it ends",
        description="Re-attach to a run: its output so far, then the rest as it comes; exits "
        "with the agent's exit code. Leaving (Ctrl-C) does not stop the run.",
    )
    follow.add_argument("run_id", metavar="RUN")
    follow.set_defaults(run=cmd_follow, live=True)
    show = runs.add_parser(
        "show",
        help="print a run's output so far (without waiting)",
        description="A run's output so far (a running run is not waited for); --json: the "
        "run's record instead.",
        json=True,
    )
    show.add_argument("run_id", metavar="RUN")
    show.set_defaults(run=cmd_follow, live=False)
    stop = runs.add_parser(
        "stop",
        help="stop a run",
        description="Stop a run: TERM, then KILL after 5 s, to the agent and all it started.",
        run=cmd_stop,
    )
    stop.add_argument("run_id", metavar="RUN")


def cmd_prompt(args: argparse.Namespace) -> int:
    instruction = " ".join(args.instruction) if args.instruction else None
    if instruction is None:
        if sys.stdin.isatty():
            raise UsageError("no instruction: give it as an argument or on stdin")
        instruction = sys.stdin.read()
    if not instruction.strip():
        raise UsageError("the instruction is empty: give it as an argument or on stdin")
    with client(args) as c:
        run = c.start_run(
            box_ref(args.box),
            instruction,
            agent=args.agent,
            workdir=args.workdir,
            model=args.model,
            json_events=args.json,
            wake=args.wake,
        )
        if args.detach:
            print(run.id)
            note(f"{run.agent} is running in {run.box}: paddock runs follow {run.id}")
            return 0
        return _follow(c, run.id)


def _follow(c: Client, run_id: str, live: bool = True) -> int:
    code = 0 if not live else 1
    for event in c.follow_run(run_id, live=live):
        if "stream" in event:
            target = sys.stdout if event["stream"] == "stdout" else sys.stderr
            target.write(str(event["data"]))
            target.flush()
        elif "status" in event:
            code = event["exit_code"] if isinstance(event["exit_code"], int) else 1
            if event["status"] not in ("succeeded", "failed"):
                note(f"run {run_id}: {event['status']}")
    return code


def cmd_stop(args: argparse.Namespace) -> int:
    run = call(args, lambda c: c.stop_run(args.run_id))
    note(f"run {run.id}: {run.status}")
    return 0


def cmd_follow(args: argparse.Namespace) -> int:
    with client(args) as c:
        if getattr(args, "json", False):
            emit_json(c.get_run(args.run_id))
            return 0
        return _follow(c, args.run_id, live=args.live)


def cmd_runs(args: argparse.Namespace) -> int:
    runs = call(args, lambda c: c.list_runs(box_ref(args.box)))
    return listing(
        runs,
        args.json,
        ["RUN", "AGENT", "STATUS", "STARTED", "DURATION", "INSTRUCTION"],
        lambda r: [
            r.id,
            r.agent,
            r.status + (f" ({r.exit_code})" if r.exit_code not in (None, 0) else ""),
            since(r.started_at),
            duration(((r.ended_at or r.started_at) - r.started_at).total_seconds())
            if r.ended_at
            else "-",
            json.dumps(r.instruction[:40])[1:-1],
        ],
    )
