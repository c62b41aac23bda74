"""`paddock skill`: install the Paddock skill (how to use boxes, for coding agents) where
each agent looks for skills on this machine, or print it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import examples
from ._output import note

# Where each agent reads user-level skills (Agent Skills format: a folder with SKILL.md).
LOCATIONS = {
    "claude": "~/.claude/skills/paddock",
    "codex": "~/.codex/skills/paddock",
    "opencode": "~/.config/opencode/skill/paddock",
    "pi": "~/.pi/agent/skills/paddock",
    "kimi": "~/.kimi-code/skills/paddock",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "skill",
        help="install the Paddock skill for coding agents (or print it)",
        description="The Paddock skill teaches a coding agent to use boxes through this CLI "
        "(create, push, exec, screenshot, pull, stop). `install` puts it where each agent "
        "looks for skills (all of them unless --agent).",
        epilog=examples(
            "paddock skill install", "paddock skill install --agent claude", "paddock skill --print"
        ),
        run=cmd_skill,
    )
    p.add_argument("action", nargs="?", choices=["install"], help="install it")
    p.add_argument(
        "--agent", choices=sorted(LOCATIONS), action="append", help="only for this agent"
    )
    p.add_argument("--print", action="store_true", help="print the skill to stdout")


def skill_text() -> str:
    return (Path(__file__).parent.parent / "skill" / "SKILL.md").read_text()


def cmd_skill(args: argparse.Namespace) -> int:
    if args.print or args.action is None:
        print(skill_text(), end="")
        if args.action is None and not args.print:
            note("install it with `paddock skill install [--agent NAME]`")
        return 0
    for agent in args.agent or sorted(LOCATIONS):
        target = Path(LOCATIONS[agent]).expanduser()
        target.mkdir(parents=True, exist_ok=True)
        (target / "SKILL.md").write_text(skill_text())
        note(f"{agent}: {target / 'SKILL.md'}")
    return 0
