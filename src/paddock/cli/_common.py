"""What every command shares: the client, the `current` box, the parser, and errors."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap

from .._config import ClientConfig
from ..wire.errors import InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Literal, NoReturn, TypeVar

    from .. import Client

    T = TypeVar("T")

# Exit codes (docs/cli.md has the table). A command's own code passes through `exec`.
EXIT_ERROR = 1  # Paddock (or the server) refused or failed
EXIT_USAGE = 2  # the command line is wrong; nothing was sent
EXIT_EXEC_FAILED = 125  # `exec`: Paddock failed, not the command (as `docker exec`)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
EXIT_BROKEN_PIPE = 141  # stdout closed early (`paddock ls | head -1`): 128 + SIGPIPE


# What the server knows (paddockd/domain/credentials.py and agents.py; a test keeps these
# equal), named in help texts without asking it.
PROVIDERS = ("anthropic", "openai", "openrouter", "moonshot", "prime")
AGENTS = ("claude", "codex", "opencode", "pi", "prime", "kimi")


class UsageError(InvalidRequest):
    """A command line the CLI refuses before sending anything (exit 2, as argparse's own)."""


def client(args: argparse.Namespace) -> Client:
    from .. import Client

    return Client(url=getattr(args, "url", None) or None, token=None)


def call(args: argparse.Namespace, op: Callable[[Client], T]) -> T:
    """One operation on the server the command line names, on a connection of its own."""
    with client(args) as c:
        return op(c)


def box_ref(ref: str) -> str:
    """`current` means the box made or chosen last (`paddock new` / `paddock use`)."""
    from .._client import current_box

    return current_box() if ref == "current" else ref


def set_current(name: str | None) -> None:
    cfg = ClientConfig.load(apply_env=False)
    cfg.current = name
    cfg.save()


def seconds_arg(what: str = "duration", zero: str = "") -> Callable[[str], int]:
    """An argparse type for a duration (a TTL, a token's lifetime): seconds, or a number
    with s/m/h/d. `zero`: what 0 means, for the message."""

    def parse(text: str) -> int:
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
        # Digits only: int() would also take "-5", " 5" and "5_0".
        if not number.isdigit():
            raise argparse.ArgumentTypeError(
                f"invalid {what} {text!r}: use seconds{zero}, or e.g. 90m, 2h, 1d"
            )
        return int(number) * unit

    return parse


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
                out.extend(
                    textwrap.wrap(
                        " ".join(prose), width, initial_indent=indent, subsequent_indent=indent
                    )
                )
                prose.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line[0].isspace():
                flush()
                out.extend(_table_row(indent + line, width))
            else:
                prose.append(line.strip())
        flush()
        return "\n".join(out)


def _table_row(line: str, width: int) -> list[str]:
    """An indented line as it is; a long row of a two-column list ("  NAME   what it is")
    wrapped under its second column. An example command is never broken: it is pasted."""
    gap = re.search(r"\S {2,}(?=\S)", line)
    if len(line) <= width or gap is None:
        return [line]
    hang = " " * gap.end()
    return textwrap.wrap(line, width, subsequent_indent=hang, drop_whitespace=True) or [line]


class PaddockParser(argparse.ArgumentParser):
    """The parser of `paddock` and each of its commands: wrapped help, a short error (what
    is wrong, and where the help is), and an optional default subcommand so that
    `paddock snapshots BOX` reads as `paddock snapshots ls BOX` while
    `paddock snapshots rm --help` is the help of `rm`."""

    def __init__(self, *args: object, intermixed: bool = False, **kwargs: object) -> None:
        kwargs["formatter_class"] = HelpFormatter  # one help format for every command
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.register("action", "parsers", _Commands)
        self.default_subcommand: str | None = None
        # Positionals may come after options (`paddock prompt BOX --agent X "do this"`):
        # plain argparse matches all positionals before the first option.
        self._intermixed = intermixed
        self._intermixing = False

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\nSee `{self.prog} --help`.\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.default_subcommand is not None:
            args = self._with_subcommand(list(sys.argv[1:] if args is None else args))
        if self._intermixed and not self._intermixing:
            # parse_known_intermixed_args parses twice through this method.
            self._intermixing = True
            try:
                return self.parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False
        return super().parse_known_args(args, namespace)

    def subcommands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                found: dict[str, argparse.ArgumentParser] = action.choices
                return found
        return {}

    def _with_subcommand(self, args: list[str]) -> list[str]:
        """The subcommand first: the one named (options before it go after it, to the
        subcommand that has them), else the default."""
        names = self.subcommands()
        if not args:  # `paddock snapshots` alone: its help
            return args
        first = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        if first is None:
            # Only options: `paddock snapshots --help` is the help of `snapshots`.
            return args if {"-h", "--help"} & set(args) else [str(self.default_subcommand), *args]
        if args[first] in names:
            return [args[first], *args[:first], *args[first + 1 :]]
        return [str(self.default_subcommand), *args]


# How many boxes a command takes (`box=` of a command): its BOX argument(s).
_BOXES = {"one": ("box", None), "some": ("boxes", "+"), "any": ("boxes", "*")}


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose help is at least their one-line summary (`paddock use --help`).
    What most commands share is said where the command is named: `run`, the function
    that runs it; `box`, its BOX argument ("one", or "some"/"any" for a list in
    `args.boxes`), before any other; `json`, a --json flag."""

    def add_parser(
        self,
        name: str,
        *,
        run: Callable[[argparse.Namespace], int] | None = None,
        box: Literal["one", "some", "any"] | None = None,
        json: bool = False,
        **kwargs: Any,
    ) -> argparse.ArgumentParser:
        summary = kwargs.get("help")
        if summary and not kwargs.get("description"):
            kwargs["description"] = summary[0].upper() + summary[1:] + "."
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        if box is not None:
            dest, nargs = _BOXES[box]
            parser.add_argument(dest, nargs=nargs, metavar="BOX")
        if json:
            add_json(parser)
        if run is not None:
            parser.set_defaults(run=run)
        return parser


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


def pairs(words: list[str], flag: str = "--env") -> dict[str, str]:
    """KEY=VALUE words (repeated `flag`s) as a dict; a word without `=` is a usage error."""
    found = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise UsageError(f"{flag} takes KEY=VALUE, not {word!r}")
        found[key] = value
    return found


def megabytes(text: str) -> int:
    """MiB from a size as people write it: 512m, 8g, 1t (binary units; a bare number is
    MiB). For argparse's `type=`: a mistake is a usage error that says what is expected."""
    units = {"m": 1, "g": 1024, "t": 1024 * 1024}
    low = text.strip().lower().removesuffix("ib").removesuffix("b")
    number, unit = (low[:-1], units[low[-1]]) if low and low[-1] in units else (low, 1)
    if not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 20g or 512m")
    return int(number) * unit
