"""What every command shares: the client, the `current` box, the parser, and errors."""

from __future__ import annotations

import argparse
import sys
import textwrap

from .._config import ClientConfig
from .._exceptions import InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import NoReturn

    from .. import Client

# Exit codes (docs/cli.md has the table). A command's own code passes through `exec`.
EXIT_ERROR = 1  # Paddock (or the server) refused or failed
EXIT_USAGE = 2  # the command line is wrong; nothing was sent
EXIT_EXEC_FAILED = 125  # `exec`: Paddock failed, not the command (as `docker exec`)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
EXIT_BROKEN_PIPE = 141  # stdout closed early (`paddock ls | head -1`): 128 + SIGPIPE


class UsageError(InvalidRequest):
    """A command line the CLI refuses before sending anything (exit 2, as argparse's own)."""


def client(args: argparse.Namespace) -> Client:
    from .. import Client

    return Client(url=getattr(args, "url", None) or None, token=None)


def box_ref(ref: str) -> str:
    """`current` means the box made or chosen last (`paddock new` / `paddock use`)."""
    from .._client import current_box

    return current_box() if ref == "current" else ref


def set_current(name: str | None) -> None:
    cfg = ClientConfig.load(apply_env=False)
    cfg.current = name
    cfg.save()


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def examples(*lines: str) -> str:
    """An epilog of example command lines (each one is parsed, and most run, by the tests)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose to the terminal, and keeps indented lines (examples, command lists)
    as they are written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                out.extend(textwrap.wrap(" ".join(prose), width, initial_indent=indent,
                                         subsequent_indent=indent))
                prose.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line[0].isspace():
                flush()
                out.append(indent + line)
            else:
                prose.append(line.strip())
        flush()
        return "\n".join(out)


class PaddockParser(argparse.ArgumentParser):
    """The parser of `paddock` and each of its commands: wrapped help, a short error (what
    is wrong, and where the help is), and an optional default subcommand so that
    `paddock snapshots BOX` reads as `paddock snapshots ls BOX` while
    `paddock snapshots rm --help` is the help of `rm`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.default_subcommand: str | None = None

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\nSee `{self.prog} --help`.\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.default_subcommand is not None:
            args = self._with_subcommand(list(sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def subcommands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                found: dict[str, argparse.ArgumentParser] = action.choices  # type: ignore[assignment]
                return found
        return {}

    def _with_subcommand(self, args: list[str]) -> list[str]:
        """The subcommand first: the one named (options before it go after it, to the
        subcommand that has them), else the default."""
        names = self.subcommands()
        first = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        if first is None:
            # Only options: `paddock snapshots --help` is the help of `snapshots`.
            return args if {"-h", "--help"} & set(args) else [str(self.default_subcommand), *args]
        if args[first] in names:
            return [args[first], *args[:first], *args[first + 1 :]]
        return [str(self.default_subcommand), *args]


def nested(
    parser: argparse.ArgumentParser, default: str | None = None
) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    """Subcommands of a command (`paddock snapshots rm ...`). Without one, the command
    runs `default`, or prints its help."""
    sub = parser.add_subparsers(metavar="COMMAND", parser_class=PaddockParser)
    if isinstance(parser, PaddockParser):
        parser.default_subcommand = default
    parser.set_defaults(run=_help_of(parser))
    return sub


def _help_of(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def show(_: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    return show
