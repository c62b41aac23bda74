"""Entry point of `paddock`: parse, run one command, turn errors into messages."""

from __future__ import annotations

import argparse
import sys

from .._version import __version__

DESCRIPTION = """Paddock: isolated Linux boxes for coding agents, on your own server.

Start here:
  paddock new --type small --ttl 3600          create a box (it becomes `current`)
  paddock push current . --to /config/project copy this folder into it
  paddock exec current -- bash -lc 'cd /config/project && npm test'
  paddock stop current                         stop it; its files are kept

BOX is a box name, an id prefix, or `current`."""


# Which module registers each command. A run builds only the parser it needs: on a small
# VPS building every subcommand costs ~40 ms, a third of a `paddock exec`.
COMMANDS = {
    **dict.fromkeys(["new", "ls", "show", "use", "stop", "resume", "rm", "extend", "types"], "box"),
    **dict.fromkeys(["exec", "shell"], "execs"),
    **dict.fromkeys(["push", "pull"], "files"),
    **dict.fromkeys(["snapshot", "snapshots", "restore", "fork"], "snapshot"),
    "drive": "drive",
    "network": "network",
    **dict.fromkeys(["desktop", "screenshot"], "desktop"),
    "skill": "skill",
    **dict.fromkeys(["auth", "agents"], "auth"),
    **dict.fromkeys(["prompt", "runs"], "runs"),
    "mcp": "mcp",
    **dict.fromkeys(["login", "status", "image"], "server"),
}


def parser(command: str | None = None) -> argparse.ArgumentParser:
    from importlib import import_module

    p = argparse.ArgumentParser(
        prog="paddock",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"paddock {__version__}")
    p.add_argument("--url", help="server URL (default: from `paddock login`, or PADDOCK_URL)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    wanted = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for name in wanted:
        import_module(f"paddock.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # the fastest path: no parser, no imports
        print(f"paddock {__version__}")
        return 0
    command = next((a for a in argv if not a.startswith("-")), None)
    p = parser(command)
    if command == "prompt":
        # `paddock prompt BOX --agent X "do this"`: argparse has matched the positionals
        # before the options, so the instruction after them comes back as extra words.
        args, extra = p.parse_known_args(argv)
        if any(word.startswith("-") for word in extra) or (extra and args.instruction):
            p.error(f"unrecognized arguments: {' '.join(extra)}")
        if extra:
            args.instruction = " ".join(extra)
    else:
        args = p.parse_args(argv)
    if not getattr(args, "run", None):
        p.print_help()
        return 2
    from .._exceptions import ConnectionFailed, PaddockError

    try:
        code: int = args.run(args)
        return code
    except ConnectionFailed as exc:
        print(
            f"paddock: {exc.message}\n  Is paddockd running? On the server: `sudo ./install.sh` "
            "(or `sudo paddockd serve`); elsewhere: `paddock login URL`.",
            file=sys.stderr,
        )
    except PaddockError as exc:
        print(f"paddock: {exc.message}", file=sys.stderr)
    except KeyboardInterrupt:
        print("paddock: interrupted", file=sys.stderr)
        return 130
    return 125 if getattr(args, "command", None) == "exec" else 1


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
