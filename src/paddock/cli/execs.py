"""exec and shell: run commands in a box, streamed, with the command's exit code."""

from __future__ import annotations

import argparse
import os
import sys

from ..wire.errors import InvalidRequest
from ._common import UsageError, box_ref, call, client, examples, pairs
from ._output import note

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Like `docker exec`: when Paddock itself fails (not the command), exit with 125.
EXIT_PADDOCK_ERROR = 125


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "exec",
        help="run a command in a box",
        description="Run a command in a box as the box user (abc, in /config). Output streams "
        "as it is produced; paddock exits with the command's exit code: 125 when Paddock "
        "itself fails, 126 when the command cannot run (not executable, no such working "
        "directory or user), 127 when there is no such command, 2 for a bad command line. "
        "The command is argv, not a shell line: use bash -lc '...' for one.",
        epilog=examples(
            "paddock exec current -- bash -lc 'cd /config/project && npm test'",
            "paddock exec -t current -- bash",
            "echo hi | paddock exec current -- cat",
            "paddock exec -d current -- python3 -m http.server 8000",
            "paddock exec --desktop current -- xfce4-terminal",
            "paddock exec --desktop --wait current -- xdotool getdisplaygeometry",
        ),
        run=cmd_exec,
    )
    p.add_argument("-t", "--tty", action="store_true", help="allocate a terminal (implies -i)")
    p.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="send stdin to the command (the default when stdin is a pipe or a file)",
    )
    p.add_argument(
        "-n", "--no-stdin", action="store_true", help="never send stdin, even from a pipe"
    )
    p.add_argument("-w", "--workdir", metavar="DIR", help="working directory (default /config)")
    p.add_argument(
        "-e",
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="environment variable (repeatable)",
    )
    p.add_argument("-u", "--user", help="user to run as (default abc; e.g. root)")
    p.add_argument("--wake", action="store_true", help="start the box first if it is stopped")
    p.add_argument(
        "-d",
        "--detach",
        action="store_true",
        help="start it in the background and return at once, printing its pid in the box "
        "(its output goes to a file in /tmp that paddock names)",
    )
    p.add_argument(
        "--desktop",
        action="store_true",
        help="run on the box's desktop (DISPLAY, D-Bus; started if need be); returns once "
        "the program started (its output goes to /run/paddock-desktop/apps.log)",
    )
    p.add_argument(
        "--wait", action="store_true", help="with --desktop: wait for it to end, like exec"
    )
    p.add_argument("box", metavar="BOX", help="box name, id prefix, or `current`")
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the command and its arguments"
    )

    p = sub.add_parser(
        "shell",
        help="an interactive shell in a box",
        description="Open a login shell (bash) in a box with a terminal.",
        run=cmd_shell,
    )
    p.add_argument("-u", "--user", help="user (default abc)")
    p.add_argument("--wake", action="store_true", help="start the box first if it is stopped")
    p.add_argument("box", metavar="BOX", nargs="?", default="current")


def cmd_exec(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise UsageError("no command given: paddock exec BOX -- CMD [ARGS...]")
    if args.desktop:
        return _on_desktop(args, cmd)
    if args.wait:
        raise UsageError("--wait goes with --desktop (a plain exec always waits)")
    options: dict[str, Any] = {"env": pairs(args.env), "workdir": args.workdir, "user": args.user}
    if args.wake:
        options["wake"] = True
    if args.detach:
        return _detached(args, cmd, **options)
    with _signals_end_the_command():
        if args.tty or args.interactive or (not args.no_stdin and _stdin_is_data()):
            return _interactive(args, cmd, tty=args.tty, **options)
        out, err = sys.stdout.buffer, sys.stderr.buffer
        with client(args) as c:
            stream = c.exec_stream(box_ref(args.box), cmd, **options)
            for kind, data in stream:
                target = out if kind == "stdout" else err
                target.write(data)
                target.flush()
        assert stream.exit_code is not None
        return stream.exit_code


def _stdin_is_data() -> bool:
    """stdin is a pipe or a file (`echo x | paddock exec ...`, `< input`), as ssh decides."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


class Signalled(Exception):
    """paddock exec got SIGINT, SIGTERM or SIGHUP (SIGBREAK on Windows): it hangs up, and
    the server ends the command (its whole process tree) in the box."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _signals_end_the_command:
    def __enter__(self) -> None:
        import signal

        def hang_up(signum: int, _: object) -> None:
            raise Signalled(signum)

        self._saved: dict[int, Any] = {}
        # SIGBREAK: Ctrl-Break on Windows, which would otherwise end paddock before the
        # console's modes are restored.
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK"):
            number = getattr(signal, name, None)
            # One ignored from the start stays ignored (`nohup`, a background job of a
            # script), as the resident's launcher keeps it: the same either way.
            if number is not None and signal.getsignal(number) != signal.SIG_IGN:
                self._saved[number] = signal.signal(number, hang_up)

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        import signal

        for number, handler in self._saved.items():
            signal.signal(number, handler)
        if isinstance(exc, Signalled):
            # The status of a command ended by that signal, as a shell reports it.
            raise SystemExit(128 + exc.signum)


def _detached(args: argparse.Namespace, cmd: list[str], **options: Any) -> int:
    if args.tty or args.interactive:
        raise UsageError("-d runs the command without a terminal or stdin (not with -t or -i)")
    ref = box_ref(args.box)
    with client(args) as c:
        try:
            pid, log = c.start(ref, cmd, **options)
        except InvalidRequest as exc:
            if exc.code != "not_started":
                raise
            # As `exec` without -d: the box's own words and the command's exit code.
            sys.stderr.write(exc.message + "\n")
            return int(exc.details["exit_code"])
    print(pid)
    note(
        f"started {cmd[0]} in box {ref} as pid {pid}; its output goes to {log} there "
        f"(stop it with `paddock exec {ref} -- kill {pid}`)"
    )
    return 0


def _on_desktop(args: argparse.Namespace, cmd: list[str]) -> int:
    if args.detach:
        raise UsageError("--desktop already returns once the program started (no -d)")
    if args.tty or args.interactive or args.user:
        raise UsageError("--desktop runs as the box user, without a terminal or stdin")
    ref = box_ref(args.box)
    result = call(
        args,
        lambda c: c.exec_desktop(
            ref, cmd, wait=args.wait, env=pairs(args.env), workdir=args.workdir
        ),
    )
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if not args.wait and result.exit_code == 0:
        note(f"started {cmd[0]} on the desktop of {ref} (`paddock screenshot {ref}`)")
    return result.exit_code


def cmd_shell(args: argparse.Namespace) -> int:
    wake = {"wake": True} if args.wake else {}
    return _interactive(
        args, ["/bin/bash", "-l"], tty=True, env={}, workdir=None, user=args.user, **wake
    )


def _interactive(args: argparse.Namespace, cmd: list[str], tty: bool, **options: Any) -> int:
    from ._console import open_console, terminal_size

    tty = tty and sys.stdin.isatty()
    cols, rows = terminal_size() if tty else (None, None)
    with client(args) as c:
        session = c.exec_session(box_ref(args.box), cmd, tty=tty, cols=cols, rows=rows, **options)
        # Raw mode only once the session is open: until then an error prints as usual.
        console = open_console() if tty else None
        read = console.read if console else _read_stdin
        if console:
            console.watch_size(session.resize)

        def pump_stdin() -> None:
            try:
                while data := read():
                    session.send(data)
                session.close_stdin()
            except Exception:  # the session ended while we were reading: nothing to do
                return

        import threading

        threading.Thread(target=pump_stdin, daemon=True).start()
        try:
            for kind, data in session:
                target = sys.stdout.buffer if kind == "stdout" else sys.stderr.buffer
                target.write(data)
                target.flush()
        finally:
            if console:
                console.restore()
            session.close()
    return session.exit_code if session.exit_code is not None else EXIT_PADDOCK_ERROR


def _read_stdin() -> bytes:
    return os.read(sys.stdin.fileno(), 65536)
