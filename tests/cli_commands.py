"""Every command of `paddock`, read from its parser, with arguments that parse: for tests
that run them all, so a new command or subcommand is covered without anyone listing it."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator

from paddock.cli._common import PaddockParser
from paddock.cli.main import parser

# A value for a positional or a required option, by its metavar (else "x").
VALUES = {
    "BOX": "nosuchbox",
    "SNAP": "1",
    "RUN": "r1",
    "PROVIDER": "anthropic",
    "NAME": "drive1",
    "URL": "http://127.0.0.1:9",
    "SECONDS": "60",
    "SRC": "/etc/hostname",
    "DEST": "/tmp/x",
}
# Values for a positional that takes one or more (`cp SRC... DEST` needs two).
SEVERAL = {
    "PATH": ["nosuchbox:/etc/hostname", "/tmp/paddock-test-dest"],
    "BOX PORT | ls [BOX] | rm ID": ["nosuchbox", "8080"],
}


def tree(
    p: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command path, its parser) for `paddock` and each command and subcommand."""
    p = p or parser()
    yield path, p
    if isinstance(p, PaddockParser):
        for name, child in p.subcommands().items():
            yield from tree(child, (*path, name))


def summaries(p: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, as `paddock --help` lists it."""
    found: dict[str, str] = {}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                found[choice.dest] = str(choice.help or "")
    return found


def _value(action: argparse.Action, values: dict[str, str]) -> str:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return str(next(iter(action.choices)))
    return values.get(str(action.metavar), "x")


def runnable(values: dict[str, str] | None = None) -> list[tuple[str, ...]]:
    """Every command that does something (not a group that only shows its help), as an
    argv that parses: the command path, then its required options and positionals."""
    values = {**VALUES, **(values or {})}
    found = []
    for path, p in tree():
        if not path or (isinstance(p, PaddockParser) and p.subcommands()):
            continue
        argv: list[str] = list(path)
        for action in p._actions:
            if action.option_strings:
                if action.required:
                    argv += [action.option_strings[-1], _value(action, values)]
            elif action.nargs == argparse.REMAINDER:
                argv += ["--", "true"]
            elif action.nargs == "+" and action.metavar in SEVERAL:
                argv += SEVERAL[str(action.metavar)]
            elif action.nargs not in ("?", "*"):
                argv.append(_value(action, values))
        found.append(tuple(argv))
    return found


def examples() -> list[tuple[str, str]]:
    """(command, example line) for every example in a `--help` epilog."""
    found = []
    for path, p in tree():
        for block in re.split(r"\n(?=\S)", p.epilog or ""):
            if block.startswith("examples:"):
                found += [(" ".join(path), line.strip()) for line in block.splitlines()[1:]]
    return found


def paddock_argv(line: str) -> list[list[str]]:
    """The `paddock` command lines in a shell line: `a | paddock x`, `paddock x $(paddock y)`,
    `paddock x < file` each give their paddock words (a substitution counts as a word)."""
    found = []
    for inner in re.findall(r"\$\(([^)]*)\)", line):
        found += paddock_argv(inner)
    lexer = shlex.shlex(
        re.sub(r"\$\([^)]*\)", "SUBSTITUTED", line), posix=True, punctuation_chars=True
    )
    lexer.whitespace_split = True  # words as a shell sees them; operators still apart
    command: list[str] = []
    for token in [*lexer, ";"]:
        if token in ("|", "&&", "||", ";", "<", ">"):
            if command[:1] == ["paddock"]:
                found.append(command[1:])
            command = [] if token != "<" else ["<"]  # what follows `<` is a file name
        else:
            command.append(token)
    return found
