"""The `paddock` command's entry point. Each command is handed to this user's resident CLI
process when one answers (`cli/resident.py`: an interpreter with the CLI loaded forks a
child per command, so a command pays no interpreter start and no imports), else it runs
here as it always did and a resident is started for the next one.

What this module imports is what every command pays before anything else: only the
interpreter's built-in modules, none of the standard library's Python ones."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's Python module imports enum
import _socket
import marshal
import os
import sys

PROTOCOL = 3
# Signals the terminal or a caller sends the command: passed on to the child running it.
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGWINCH", "SIGUSR1", "SIGUSR2")
# A resident answers at once or not at all (a stale socket is refused, a stopped resident
# is waited for this long): the command then runs here. The launcher alone decides: the
# resident offers ("R") and runs the command only on the launcher's go ("G"), so a
# resident that answers late never runs a command that is already running here.
ANSWER_SECONDS = 2.0


def private_dir(path: str) -> bool:
    """Whether `path` is a folder (not a link to one) of this user's alone."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077 and st.st_mode >> 12 == 0o04


def socket_dir() -> str:
    """This user's folder for the resident's socket: in the session's runtime folder when
    that is this user's own (not one an environment kept across `sudo` names), else in
    /tmp, made for this user alone."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = runtime if os.path.isabs(runtime) and private_dir(runtime) else "/tmp"
    return f"{base}/paddock-cli-{os.getuid()}"


def code_key() -> str:
    """What the resident must have loaded to run this command: this interpreter and the
    package's files as they are now (an upgrade or an edit gives another key, so a
    resident never runs old code; the old one idles out)."""
    here = os.path.dirname(os.path.abspath(__file__))
    newest, count = 0, 0
    for folder in (here, f"{here}/cli", f"{here}/wire"):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    newest = max(newest, entry.stat().st_mtime_ns)
                    count += 1
    # The folders holding the libraries and the standard library: an upgrade of either.
    libraries = os.stat(os.path.dirname(here)).st_mtime_ns
    text = f"{PROTOCOL}:{sys.executable}:{sys.version}:{here}:{newest}:{count}:{libraries}"
    digest = 0xCBF29CE484222325  # FNV-1a: no hashlib import on this path
    for byte in text.encode():
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def socket_path() -> str:
    return f"{socket_dir()}/cli-{code_key()}.sock"


def _enabled() -> bool:
    """The resident serves commands without a terminal on stdin (scripts, agents, pipes):
    one typed at a terminal runs here, where job control, password prompts and
    `/dev/tty` are the terminal's as ever."""
    if sys.platform != "linux" or os.environ.get("PADDOCK_RESIDENT", "1") == "0":
        return False
    try:
        return not os.isatty(0)
    except OSError:
        return False


def _connect(path: str) -> _socket.socket | None:
    # Only a folder of this user's that no one else can enter, and then only a peer of
    # this user's: a socket planted by another user would be handed this command's
    # terminal and environment.
    if not private_dir(os.path.dirname(path)):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_SECONDS)
        sock.connect(path)
        creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        if int.from_bytes(creds[4:8], sys.byteorder) != os.getuid():
            raise OSError("another user's socket")
    except OSError:
        sock.close()
        return None
    return sock


def _handed_over(sock: _socket.socket) -> int | None:
    """Run this command in the resident; its exit code, or None if the resident could not
    take it (nothing ran: the caller runs it here)."""
    umask = os.umask(0o077)
    os.umask(umask)
    # Signals are taken from here on: before the resident has the command they wait, and
    # go to it once it runs (or back to this process, if it runs here after all). One
    # this process ignores (`nohup`) stays ignored, here and by the command.
    waiting: list[int] = []
    running = False

    def forward(signum: int, frame: object) -> None:
        if not running:
            waiting.append(signum)
            return
        try:  # noqa: SIM105 - contextlib is a Python module: not on this path
            sock.send(b"S" + bytes([signum]))
        except OSError:
            pass

    kept = {}
    ignored = []
    for name in FORWARDED:
        signum = getattr(_signal, name)
        if _signal.getsignal(signum) == _signal.SIG_IGN:
            ignored.append(signum)
        else:
            kept[signum] = _signal.signal(signum, forward)
    try:
        body = marshal.dumps((PROTOCOL, sys.argv, dict(os.environ), os.getcwd(), umask, ignored))
        head = len(body).to_bytes(4, "big")
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _fds((0, 1, 2)))]
        sent = sock.sendmsg([head + body], rights)
        if sent < len(head) + len(body):
            sock.sendall((head + body)[sent:])
        taken = sock.recv(1)  # within ANSWER_SECONDS
        if taken == b"R":
            sock.sendall(b"G")
    except (OSError, ValueError):
        taken = b""  # a closed stdio descriptor, a current folder that is gone, no answer
    if taken != b"R":  # refused, or too late: nothing ran there
        sock.close()
        for signum, handler in kept.items():
            _signal.signal(signum, handler)
        for signum in waiting:
            os.kill(os.getpid(), signum)
        return None
    sock.settimeout(None)
    running = True
    for signum in waiting:
        forward(signum, None)
    status = b""
    while len(status) < 4:
        try:
            chunk = sock.recv(4 - len(status))
        except InterruptedError:
            continue
        if not chunk:
            return 1  # the resident went away under the command
        status += chunk
    return int.from_bytes(status, "big")


def _fds(fds: tuple[int, ...]) -> bytes:
    return b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)


def run() -> None:
    if _enabled():
        path = socket_path()
        sock = _connect(path)
        if sock is not None:
            code = _handed_over(sock)
            if code is not None:
                sys.exit(code)
        else:
            _start_resident(path)
    from .cli.main import run as run_here

    run_here()


# What the resident keeps of the environment it is started in: each command brings its
# own, and a token or proxy setting of the first command's has no business there.
RESIDENT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def _start_resident(path: str) -> None:
    """A resident for the next command, in a session of its own that outlives this one;
    it finds out for itself whether another start beat it to the socket."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        # Nothing else of this command's stays open in it: a lock (`flock ... paddock`)
        # or a pipe's end held by the resident would outlive the command.
        os.closerange(3, 1 << 16)
        os.chdir("/")
        env = {k: os.environ[k] for k in RESIDENT_ENV if k in os.environ}
        # -E: no PYTHONPATH or other PYTHON* settings; the current folder is "/".
        argv = [sys.executable, "-E", "-m", "paddock.cli.resident", path]
        os.execve(sys.executable, argv, env)
    finally:
        os._exit(1)
