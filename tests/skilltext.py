"""The commands the Paddock skill shows, read from its sh blocks: parsed by the unit tests,
walked against a live server by the integration tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

SKILL = Path(__file__).parents[1] / "skill" / "paddock" / "SKILL.md"


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", SKILL.read_text(), re.S)


def commands(block: str | None = None) -> list[str]:
    """Every paddock command in the skill's sh blocks (or one block), as a command line of
    its own: the comment after two spaces dropped, taken out of a pipeline, without
    redirections."""
    lines = [
        line.split("  #")[0].strip()
        for b in ([block] if block else blocks())
        for line in b.splitlines()
    ]
    return [cmd for line in lines for cmd in _pipeline(line) if cmd.startswith("paddock ")]


def _pipeline(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    tokens = iter(lexer)
    for token in tokens:
        if token == "|":
            commands.append([])
        elif token in ("<", ">", ">>"):
            next(tokens)  # the file redirected from or to
        else:
            commands[-1].append(token)
    return [shlex.join(words) for words in commands if words]
