"""Entry point of `paddock`: parse, run one command, turn errors into messages and exit
codes (the table in docs/cli.md)."""

from __future__ import annotations

import os
import sys

from .._version import __version__
from ._common import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_EXEC_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PaddockParser,
    UsageError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

DESCRIPTION = """Paddock: isolated Linux boxes for coding agents, on your own server.

Start here:
  paddock new --type small --ttl 3600          create a box (it becomes `current`)
  paddock push current . --to /config/project copy this folder into it
  paddock exec current -- bash -lc 'cd /config/project && npm test'
  paddock stop current                         stop it; its files are kept

BOX is a box name, an id prefix, or `current`. `paddock help COMMAND` explains one."""


# Which module registers each command. A run builds only the parser it needs: on a small
# VPS building every subcommand costs ~40 ms, a third of a `paddock exec`.
COMMANDS = {
    **dict.fromkeys(
        ["new", "ls", "show", "use", "stop", "resume", "rm", "extend", "types", "logs"], "box"
    ),
    **dict.fromkeys(["exec", "shell"], "execs"),
    **dict.fromkeys(["push", "pull", "cp"], "files"),
    **dict.fromkeys(["snapshot", "snapshots", "restore", "fork"], "snapshot"),
    **dict.fromkeys(["export", "import"], "portable"),
    "drive": "drive",
    "host": "host",
    "network": "network",
    **dict.fromkeys(["desktop", "screenshot"], "desktop"),
    "skill": "skill",
    **dict.fromkeys(["auth", "agents"], "auth"),
    "secret": "secret",
    "template": "template",
    **dict.fromkeys(["ssh", "ssh-config", "ssh-proxy", "ssh-key", "forward"], "ssh"),
    **dict.fromkeys(["prompt", "runs"], "runs"),
    "mcp": "mcp",
    "e2b": "e2b",
    "stats": "stats",
    "audit": "audit",
    "webhook": "webhook",
    "settings": "settings",
    **dict.fromkeys(["members", "token"], "members"),
    **dict.fromkeys(["login", "status", "image"], "server"),
    **dict.fromkeys(["version", "help", "completion"], "meta"),
}
# Commands whose failures are reported like `docker exec`'s (125), apart from the
# command's own exit code.
EXEC_COMMANDS = frozenset({"exec", "shell"})


def parser(command: str | None = None) -> PaddockParser:
    from importlib import import_module

    p = PaddockParser(prog="paddock", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"paddock {__version__}")
    p.add_argument("--url", help="server URL (default: from `paddock login`, or PADDOCK_URL)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=PaddockParser)
    wanted = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for name in wanted:
        import_module(f"paddock.cli.{name}").register(sub)
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line as a namespace; argparse exits 2 on a bad one."""
    return parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # the fastest path: no parser, no imports
        print(f"paddock {__version__}")
        return 0
    args = None
    try:
        args = parse(argv)
        if not getattr(args, "run", None):
            parser().print_help(sys.stderr)
            return EXIT_USAGE
        code: int = args.run(args)
        return code
    except Exception as exc:
        return _report(exc, getattr(args, "command", None))
    except KeyboardInterrupt:
        print("paddock: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _report(exc: Exception, command: str | None) -> int:
    """One short message on stderr for anything that went wrong, and its exit code. A
    traceback is for Paddock's developers: PADDOCK_DEBUG=1 shows it."""
    from .._proxy import PROXY_FAILED
    from ..wire.errors import ConnectionFailed, PaddockError

    failed = EXIT_EXEC_FAILED if command in EXEC_COMMANDS else EXIT_ERROR
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`| head`): say nothing, and keep the interpreter's final
        # flush from failing again on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    if os.environ.get("PADDOCK_DEBUG"):
        raise exc
    if isinstance(exc, UsageError):
        where = f"paddock {command}" if command else "paddock"
        hint = "" if "--help" in exc.message else f"\nSee `{where} --help`."
        _say(f"{where}: {exc.message}{hint}")
        return EXIT_USAGE
    if isinstance(exc, ConnectionFailed) and exc.code == PROXY_FAILED:
        # "Is paddockd running?" would send the user to the wrong machine.
        _say(
            f"paddock: {exc.message}\n  The proxy comes from HTTPS_PROXY or HTTP_PROXY; "
            'NO_PROXY=HOST connects to HOST directly (docs/cli.md, "Proxies").'
        )
    elif isinstance(exc, ConnectionFailed):
        _say(
            f"paddock: {exc.message}\n  Is paddockd running? On the server: `sudo ./install.sh` "
            "(or `sudo paddockd serve`); elsewhere: `paddock login URL`."
        )
    elif isinstance(exc, PaddockError):
        _say(f"paddock: {exc.message}")
    elif isinstance(exc, OSError):  # a local file or folder: the path and the reason
        where = f": {exc.filename}" if exc.filename else ""
        _say(f"paddock: {exc.strerror or exc}{where}")
    elif isinstance(exc, EOFError):
        _say("paddock: stdin ended before the input this command needs")
    else:
        _say(
            f"paddock: unexpected error: {type(exc).__name__}: {exc} "
            "(PADDOCK_DEBUG=1 shows where; please report it)"
        )
    return failed


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
