"""The resident CLI process: `paddock` commands without an interpreter start each.

`paddock._launch` hands each command here over a Unix socket in a folder of the user's
own: its arguments, environment, current folder and umask, and its standard input, output
and error as file descriptors. The resident, which has the whole CLI loaded, forks a child
that takes those descriptors and that environment and runs the command exactly as
`paddock` would (`cli/main.py`), while the launcher waits: signals sent to the launcher
(Ctrl-C, a terminal's resize) are passed on to the child, and the child's exit code comes
back as the launcher's. Nothing of one command outlives it: each child is a fresh fork.

One thread and one selector: the resident forks, so it never holds a lock another thread
could be holding. It serves only its own user (the peer's uid is checked), and leaves
after IDLE_SECONDS without a command."""

from __future__ import annotations

import contextlib
import marshal
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

from .._launch import PROTOCOL, private_dir

IDLE_SECONDS = 600.0
MAX_REQUEST = 4 << 20  # arguments and environment, bytes
READ_SECONDS = 5.0  # for the launcher's request, sent at once after its connect


@dataclass
class _Command:
    conn: socket.socket
    pid: int


# What commands import as they run (the SDK's WebSocket and TLS, the terminal's, the
# archive's): a child that imported them would pay their import on every command.
LIBRARIES = (
    "websockets.sync.client",
    "ssl",
    "http.client",
    "urllib.request",
    "email.parser",
    "email.utils",
    "importlib.metadata",
    "concurrent.futures",
    "queue",
    "logging",
    "uuid",
    "tempfile",
    "tarfile",
    "zipfile",
    "csv",
    "platform",
    "unicodedata",
    "encodings.idna",
    "getpass",
    "termios",
    "tty",
    "pathspec",
    "webbrowser",
)


def _preload() -> None:
    """Every module a command may import, so that no child imports anything."""
    import pkgutil
    from importlib import import_module

    import paddock

    from . import main

    for info in pkgutil.walk_packages(paddock.__path__, "paddock."):
        with contextlib.suppress(Exception):
            import_module(info.name)
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):
            import_module(name)
    main.parser()  # and what building the whole parser imports


def _listen(path: str) -> socket.socket | None:
    """The socket, bound under the folder's lock; None when another resident has it."""
    import fcntl  # Unix's: the client's modules import on Windows too

    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not private_dir(folder):
        return None  # not a folder of this user's alone: serve nothing there
    lock = os.open(f"{folder}/lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            return None  # another resident answers there
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a dead resident's
        finally:
            probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(64)
        return listener
    finally:
        os.close(lock)


def _request(conn: socket.socket) -> tuple[tuple[object, ...], list[int]] | None:
    """The launcher's request and the descriptors that came with it."""
    conn.settimeout(READ_SECONDS)
    data, fds = b"", []
    try:
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk, ancillary, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(16))
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds += list(struct.unpack(f"{usable // 4}i", payload[:usable]))
            if not chunk:
                break
            data += chunk
            if len(data) >= 4 and int.from_bytes(data[:4], "big") > MAX_REQUEST:
                break
        size = int.from_bytes(data[:4], "big") if len(data) >= 4 else -1
        if size < 0 or size > MAX_REQUEST or len(data) != 4 + size or len(fds) != 3:
            raise ValueError("a request that is not one")
        request = marshal.loads(data[4:])
        if not (isinstance(request, tuple) and len(request) == 6 and request[0] == PROTOCOL):
            raise ValueError("another protocol")
        conn.settimeout(None)
        return request, fds
    except (OSError, ValueError, EOFError, TypeError):
        for fd in fds:
            os.close(fd)
        return None


def _go(conn: socket.socket) -> bool:
    """Offer to run the command; whether the launcher, still waiting, says go. From its go
    on the command is the resident's to run."""
    try:
        conn.settimeout(READ_SECONDS)
        conn.sendall(b"R")
        go = conn.recv(1) == b"G"
        conn.settimeout(None)
        return go
    except OSError:
        return False


def _child(request: tuple[object, ...], fds: list[int]) -> None:
    """In the fork: become the command, run it, exit with its code. Never returns."""
    code = 1
    try:
        _protocol, argv, env, cwd, umask, ignored = request
        assert isinstance(argv, list) and isinstance(env, dict) and isinstance(ignored, list)
        assert isinstance(cwd, str) and isinstance(umask, int)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in ignored:  # as the launcher had them (`nohup`)
            signal.signal(signum, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        time.tzset()
        os.umask(umask)
        os.chdir(cwd)
        sys.argv = [str(a) for a in argv]
        # As the interpreter makes them: buffered, stderr by lines, stdout by lines on a
        # terminal; PYTHONIOENCODING as it would read it.
        encoding, _, errors = os.environ.get("PYTHONIOENCODING", "").partition(":")
        encoding = encoding or "utf-8"
        sys.stdin = open(0, encoding=encoding, errors=errors or None, closefd=False)  # noqa: SIM115
        out_buffering = 1 if os.isatty(1) else -1  # 1: by lines
        sys.stdout = open(  # noqa: SIM115
            1, "w", out_buffering, encoding, errors or None, closefd=False
        )
        sys.stderr = open(  # noqa: SIM115
            2, "w", 1, encoding, errors or "backslashreplace", closefd=False
        )
        from ._common import EXIT_BROKEN_PIPE
        from .main import main

        try:
            code = main(sys.argv[1:])
        except SystemExit as done:
            if isinstance(done.code, str):
                print(done.code, file=sys.stderr)  # as the interpreter would
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = code or EXIT_BROKEN_PIPE  # the reader left before the last of it
        except Exception:
            pass
        with contextlib.suppress(Exception):
            sys.stderr.flush()
    except BaseException as exc:  # nothing may go back up into the resident's loop
        with contextlib.suppress(Exception):
            os.write(2, f"paddock: {exc}\n".encode())
    finally:
        os._exit(code & 0xFF)


def _same_context(pid: int) -> bool:
    """Whether the peer runs where the resident runs: the same namespaces, and no
    sandbox of its own (no_new_privs, seccomp). A command from inside a sandbox of this
    user's must not run outside it, nor one from outside inside it: it runs in its own
    process instead."""
    try:
        for ns in ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup"):
            if os.stat(f"/proc/{pid}/ns/{ns}").st_ino != os.stat(f"/proc/self/ns/{ns}").st_ino:
                return False
        return _confinement(f"/proc/{pid}/status") == _confinement("/proc/self/status")
    except OSError:
        return False


def _confinement(status: str) -> list[str]:
    with open(status, encoding="ascii", errors="replace") as lines:
        return [ln for ln in lines if ln.startswith(("NoNewPrivs:", "Seccomp:"))]


class Resident:
    def __init__(self, listener: socket.socket) -> None:
        self._listener = listener
        self._selector = selectors.DefaultSelector()
        self._running: dict[int, _Command] = {}  # pid -> its command
        self._by_conn: dict[int, _Command] = {}  # connection's fd -> its command
        self._idle_since = time.monotonic()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self._wake = wake_r
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self._selector.register(listener, selectors.EVENT_READ, "accept")
        self._selector.register(wake_r, selectors.EVENT_READ, "child")

    def serve(self) -> None:
        while self._running or time.monotonic() - self._idle_since < IDLE_SECONDS:
            for key, _events in self._selector.select(timeout=30):
                if key.data == "accept":
                    self._accept()
                elif key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake, 512)
                    self._reap()
                else:
                    self._from_launcher(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        peer, uid, _gid = struct.unpack("3i", creds)
        mine = uid == os.getuid() and _same_context(peer)
        got = _request(conn) if mine else None
        if got is None:
            conn.close()  # the launcher runs the command itself
            return
        request, fds = got
        if not _go(conn):  # the launcher gave up waiting and runs the command itself
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        try:
            pid = os.fork()
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.write(fds[2], f"paddock: cannot start the command: {exc}\n".encode())
                conn.sendall((1).to_bytes(4, "big"))
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        if pid == 0:
            # Nothing of the resident's, nor of other commands', stays open in the child.
            self._selector.close()
            for other in [self._listener, conn, *(c.conn for c in self._running.values())]:
                other.close()
            os.close(self._wake)
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        command = _Command(conn, pid)
        self._running[pid] = command
        self._by_conn[conn.fileno()] = command
        self._selector.register(conn, selectors.EVENT_READ, "launcher")
        self._reap()  # a child that ended before it was recorded

    def _from_launcher(self, conn: socket.socket) -> None:
        command = self._by_conn.get(conn.fileno())
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if command is None:
            return
        if not data:
            # The launcher is gone (killed, its terminal closed): as a hangup would.
            with contextlib.suppress(ProcessLookupError):
                os.kill(command.pid, signal.SIGHUP)
            self._selector.unregister(conn)
            return
        for i in range(0, len(data) - 1, 2):
            if data[i : i + 1] == b"S" and data[i + 1] in signal.valid_signals():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(command.pid, data[i + 1])

    def _reap(self) -> None:
        while self._running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            command = self._running.pop(pid, None)
            if command is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code  # killed by a signal: as a shell says
            conn = command.conn
            self._by_conn.pop(conn.fileno(), None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(conn)
            with contextlib.suppress(OSError):
                conn.sendall(code.to_bytes(4, "big"))
            conn.close()
            self._idle_since = time.monotonic()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m paddock.cli.resident SOCKET", file=sys.stderr)
        return 2
    path = argv[0]
    listener = _listen(path)
    if listener is None:
        return 0
    ours = os.stat(path).st_ino
    try:
        _preload()
        Resident(listener).serve()
    finally:
        with contextlib.suppress(OSError):
            # Only our own socket: a newer resident may have taken the path since.
            if os.stat(path).st_ino == ours:
                os.unlink(path)
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
