"""`paddock prompt` and `paddock runs`: coding agents headless in a box."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .._exceptions import InvalidRequest
from ._common import add_json, box_ref, client
from ._output import duration, emit_json, note, since, table

if TYPE_CHECKING:
    from .._client import Client

RUNS_USAGE = """paddock runs BOX [--json]
       paddock runs follow RUN | show RUN | stop RUN"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "prompt",
        help="run a coding agent headless in a box",
        description="Run a coding agent (claude, codex, opencode, pi, kimi; prime is a one-shot\n"
        "chat) in the box without a terminal, with only its provider's key (`paddock auth\n"
        "set`), and stream its output; exit with the agent's exit code. The run goes on if\n"
        "you disconnect: `paddock runs follow RUN` re-attaches. The instruction is an\n"
        "argument or stdin.",
        epilog="examples:\n  paddock prompt current 'add a test for the parser and make it pass'\n"
        "  paddock prompt current --agent codex --workdir /config/project < task.md\n"
        "  paddock prompt current --detach 'upgrade the dependencies'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("box", metavar="BOX")
    p.add_argument("instruction", nargs="?", metavar="INSTRUCTION", help="default: stdin")
    p.add_argument(
        "--agent",
        help="claude, codex, opencode, pi, kimi or prime (default: the box's, else the server's)",
    )
    p.add_argument("-w", "--workdir", metavar="DIR", help="where the agent works (default /config)")
    p.add_argument("--model", help="the model, in the agent's own naming")
    p.add_argument("-d", "--detach", action="store_true", help="print the run id and return")
    p.add_argument(
        "--json", action="store_true", help="stream the agent's structured events (JSON lines)"
    )
    p.set_defaults(run=cmd_prompt)

    p = sub.add_parser(
        "runs",
        help="a box's agent runs; follow, show or stop one",
        usage=RUNS_USAGE,
        description="List a box's agent runs, or follow (re-attach to), show (the full log) "
        "or stop one.",
    )
    p.add_argument("words", nargs="+", metavar="BOX | follow RUN | show RUN | stop RUN")
    # show: the log so far (a running run is not waited for); follow: until it ends.
    add_json(p)
    p.set_defaults(run=cmd_runs)


def cmd_prompt(args: argparse.Namespace) -> int:
    instruction = args.instruction
    if instruction is None:
        if sys.stdin.isatty():
            raise InvalidRequest("no instruction: give it as an argument or on stdin")
        instruction = sys.stdin.read()
    with client(args) as c:
        run = c.start_run(
            box_ref(args.box),
            instruction,
            agent=args.agent,
            workdir=args.workdir,
            model=args.model,
            json_events=args.json,
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


def cmd_runs(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    with client(args) as c:
        if words[0] in ("follow", "show", "stop") and len(words) == 2:
            action, run_id = words
            if action == "stop":
                run = c.stop_run(run_id)
                note(f"run {run.id}: {run.status}")
                return 0
            if action == "show" and args.json:
                emit_json(c.get_run(run_id))
                return 0
            return _follow(c, run_id, live=action == "follow")
        if len(words) != 1:
            raise InvalidRequest("usage: " + RUNS_USAGE)
        runs = c.list_runs(box_ref(words[0]))
    if args.json:
        emit_json(runs)
        return 0
    table(
        ["RUN", "AGENT", "STATUS", "STARTED", "DURATION", "INSTRUCTION"],
        [
            [
                r.id,
                r.agent,
                r.status + (f" ({r.exit_code})" if r.exit_code not in (None, 0) else ""),
                since(r.started_at),
                duration(((r.ended_at or r.started_at) - r.started_at).total_seconds())
                if r.ended_at
                else "-",
                json.dumps(r.instruction[:40])[1:-1],
            ]
            for r in runs
        ],
    )
    return 0
