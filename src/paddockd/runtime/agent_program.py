"""The exec agent: one small process in a running box that starts paddockd's commands in
place of the engine's exec (runtime/agent.py is paddockd's side).

`docker exec` starts runc for every command (about 45 ms here, more on a busy host); this
process forks. It is started once by an engine exec as the box's root, with the engine's
environment for an exec, and so has what the engine gives every exec: the box's
namespaces, cgroup, capabilities, seccomp filter and limits. A command it starts differs
from the engine's only in what runc does per exec, and that is done here the same way:
the user and groups as runc reads them from the box's /etc/passwd and /etc/group, HOME,
the environment, the working directory, a session of its own, default signal handling,
umask 022, stdin /dev/null unless attached. Where any of that fails (no such user,
program or folder), nothing has run and the agent says so: paddockd asks the engine
instead, whose words for the failure are the user's.

Protocol, one connection per command on the socket in /run/paddock:
- paddockd sends a request (4-byte length, JSON) with the pipes for the command's stdio
  (SCM_RIGHTS): the command reads and writes paddockd's pipes directly;
- the agent answers STARTED or REFUSED (one frame), and EXIT with the exit code once the
  command ends; paddockd may send KILL (the command's tree: TERM, then KILL).
Only a peer outside the box's pid namespace (paddockd: pid 0 here) is served, on a
socket only the box's root may open. The agent leaves after IDLE seconds without a
command (FIRST seconds before its first: a warm pool's box waits for its claim); it is
started again on demand.

Stdlib only, single-threaded: paddockd ships this file's source with proctree's
(runtime/agent.py PROGRAM), and the box's python3 runs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time

from .proctree import end_tree

FRAME = struct.Struct("!Bi")  # kind, value
STARTED, REFUSED, EXIT, KILL = 1, 2, 3, 9
MAX_REQUEST = 4 << 20  # argv and environment: the kernel's own limit is 2 MiB
LISTEN_BACKLOG = 64
_PEERCRED = struct.Struct("3i")


# -- who runs a command: runc's reading of the box's /etc/passwd and /etc/group ----------
class Unknown(Exception):
    """A user or group the box's files do not name (runc refuses those)."""


def _entries(text: str, fields: int) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(":")
        rows.append(parts + [""] * (fields - len(parts)))
    return rows


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) < 11 else None


def identity(spec: str, passwd: str, group: str) -> tuple[int, int, list[int], str]:
    """(uid, gid, supplementary gids, home) for a user spec `name|uid[:group|gid]`, as
    the engine finds them (runc's GetExecUser): a named user must exist, a numeric one
    need not (gid 0, home /); the supplementary groups are the gid and, unless a group is
    given, the groups listing the user by name."""
    name_arg, _, group_arg = spec.partition(":")
    if not name_arg:
        raise Unknown(spec)  # the engine's default user is the image's: its call
    uid_arg = _number(name_arg)
    uid, gid, home, name = 0, 0, "/", ""
    for row in _entries(passwd, 7):
        if row[0] == name_arg or (uid_arg is not None and _number(row[2]) == uid_arg):
            found_uid, found_gid = _number(row[2]), _number(row[3])
            if found_uid is None or found_gid is None:
                raise Unknown(name_arg)
            uid, gid, home, name = found_uid, found_gid, row[5] or "/", row[0]
            break
    else:
        if uid_arg is None:
            raise Unknown(name_arg)
        uid = uid_arg
    groups: list[int] = []
    rows = _entries(group, 4)
    if group_arg:
        gid_arg = _number(group_arg)
        for row in rows:
            if row[0] == group_arg or (gid_arg is not None and _number(row[2]) == gid_arg):
                found = _number(row[2])
                if found is None:
                    raise Unknown(group_arg)
                gid = found
                break
        else:
            if gid_arg is None:
                raise Unknown(group_arg)
            gid = gid_arg
    elif name:
        for row in rows:
            found = _number(row[2])
            if found is not None and name in row[3].split(","):
                groups.append(found)
    return uid, gid, sorted({*groups, gid}), home


def environment(base: dict[str, str], extra: dict[str, str], home: str) -> dict[str, str]:
    """The engine's exec environment (`base`) with the request's on top, and runc's HOME
    when neither has one."""
    env = {**base, **extra}
    env.setdefault("HOME", home)
    return env


def find_program(name: str, env: dict[str, str]) -> str:
    """The file runc would run for argv[0]: a path as given, else the first regular file
    with an execute bit in PATH (Go's LookPath). A relative result, or none, is refused."""
    if "/" in name:
        return name
    for folder in env.get("PATH", "").split(":"):
        if not folder.startswith("/"):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                return path
    raise FileNotFoundError(name)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4 << 20)
    except OSError:
        return ""


# -- one command --------------------------------------------------------------------
class Request:
    """A command as paddockd asks for it (its JSON, checked)."""

    def __init__(self, data: object) -> None:
        if not isinstance(data, dict):
            raise ValueError("not an object")
        argv, env = data.get("argv"), data.get("env")
        if not isinstance(argv, list) or not argv or not isinstance(env, dict):
            raise ValueError("no argv or env")
        self.argv = [str(a) for a in argv]
        self.env = {str(k): str(v) for k, v in env.items()}
        self.user = str(data.get("user") or "")
        self.cwd = str(data.get("cwd") or "")


class Agent:
    """What every command starts from: the engine's exec environment and folder."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.env, self.cwd = env, cwd


def _child(request: Request, agent: Agent, stdio: list[int], report: int) -> None:
    """In the forked child: become the command, or write why not to `report`."""
    try:
        os.setsid()
        for number in range(1, signal.NSIG):
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.umask(0o022)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        uid, gid, groups, home = identity(request.user, _read("/etc/passwd"), _read("/etc/group"))
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
        os.chdir(request.cwd or agent.cwd)  # as the user: where it may not go, runc decides
        env = environment(agent.env, request.env, home)
        os.execve(find_program(request.argv[0], env), request.argv, env)
    except BaseException:
        with contextlib.suppress(OSError):
            os.write(report, b"x")
    os._exit(127)


class Command:
    """One command's connection and process."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid = conn, pid

    def send(self, kind: int, value: int = 0) -> None:
        with contextlib.suppress(OSError):
            self.conn.sendall(FRAME.pack(kind, value))


def _with_fds(conn: socket.socket) -> tuple[bytes, list[int]]:
    """The request's length and the pipes sent with it, none of them left to a command:
    a pipe a command's daemon kept open would hold paddockd's read of its output open."""
    head, ancillary, _, _ = conn.recvmsg(4, socket.CMSG_LEN(3 * 4), socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])
    for fd in fds:  # whatever the flag did (3.11's recv_fds drops it)
        os.set_inheritable(fd, False)
    return head, fds


def _receive(conn: socket.socket) -> tuple[Request, list[int]] | None:
    """The request and its pipes; None for a peer that is not paddockd or a bad request."""
    pid, _, _ = _PEERCRED.unpack(
        conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    if pid != 0:  # a process of this box (paddockd is outside its pid namespace)
        return None
    conn.settimeout(10)
    try:
        head, fds = _with_fds(conn)
    except OSError:
        return None
    try:
        if len(head) != 4 or len(fds) not in (2, 3):
            raise ValueError("no request")
        size = struct.unpack("!I", head)[0]
        if size > MAX_REQUEST:
            raise ValueError("too large")
        body = bytearray()
        while len(body) < size:
            piece = conn.recv(min(size - len(body), 1 << 16))
            if not piece:
                raise ValueError("cut short")
            body += piece
        return Request(json.loads(body)), fds
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        return None


def _spawn(request: Request, agent: Agent, fds: list[int]) -> int:
    """The command's pid once it runs; 0 where it could not be started as asked."""
    stdio = list(fds)
    report_r = report_w = -1
    try:
        if len(stdio) == 2:
            stdio.insert(0, os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(request, agent, stdio, report_w)
    except OSError:  # no fork, no pipe: the box is at its limits; the engine says so
        return 0
    finally:
        for fd in (*stdio, report_w):
            if fd >= 0:
                os.close(fd)
    failed = os.read(report_r, 1)  # nothing: the exec closed it, the command runs
    os.close(report_r)
    if failed:
        os.waitpid(pid, 0)
        return 0
    return pid


def start(conn: socket.socket, agent: Agent) -> Command | None:
    received = _receive(conn)
    if received is None:
        conn.close()
        return None
    request, fds = received
    command = Command(conn, _spawn(request, agent, fds))
    if not command.pid:
        command.send(REFUSED)
        conn.close()
        return None
    conn.setblocking(False)
    command.send(STARTED, command.pid)  # paddockd finds it on the host by this pid
    return command


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def end(command: Command) -> None:
    """TERM, then KILL, the command's tree, from a process of its own (the grace period
    must not hold up the other commands); here, where no process can be made."""
    try:
        helper = os.fork()
    except OSError:
        end_tree(command.pid)
        return
    if helper == 0:
        try:
            end_tree(command.pid)
        finally:
            os._exit(0)


# -- the agent ----------------------------------------------------------------------
def listen(path: str) -> tuple[socket.socket, int] | None:
    """The socket at `path` and its inode, or None when another agent answers there."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return None  # one is serving: it stays
    except OSError:
        pass
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # 0600 from its first moment: only the box's root connects
    try:
        server.bind(path)
    finally:
        os.umask(old)
    server.listen(LISTEN_BACKLOG)
    return server, os.stat(path).st_ino


def _event(
    fd: int,
    server: socket.socket,
    wake_r: int,
    agent: Agent,
    commands: dict[int, Command],
    by_fd: dict[int, Command],
    poll: select.poll,
) -> float | None:
    """One ready descriptor's work; the time, when it started a command."""
    if fd == server.fileno():
        conn, _ = server.accept()
        command = start(conn, agent)
        if command is not None:
            commands[command.pid] = command
            by_fd[conn.fileno()] = command
            poll.register(conn, select.POLLIN)
        return time.monotonic()
    if fd == wake_r:
        with contextlib.suppress(BlockingIOError):
            os.read(wake_r, 512)
        return None
    command = by_fd.get(fd)
    if command is None:
        return None
    try:
        data = command.conn.recv(64)
    except BlockingIOError:
        return None
    except OSError:
        data = b""
    if data and data[0] == KILL:
        end(command)
    elif not data:  # paddockd let go: the command runs on, as the engine's
        poll.unregister(fd)
        del by_fd[fd]
    return None


def serve(server: socket.socket, agent: Agent, idle: float, first: float) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    commands: dict[int, Command] = {}  # by pid
    by_fd: dict[int, Command] = {}
    last = time.monotonic()
    poll = select.poll()
    poll.register(server, select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    served = False
    while True:
        left = (idle if served else first) - (time.monotonic() - last)
        if not commands and left <= 0:
            return
        events = poll.poll(None if commands else max(left, 0) * 1000)
        for fd, _ in events:
            try:
                last = _event(fd, server, wake_r, agent, commands, by_fd, poll) or last
            except OSError:
                time.sleep(0.1)  # out of descriptors or processes: the box's own limits
        served = served or bool(commands)  # (a command is in it until it is reaped below)
        while True:  # reap: commands, and the helpers that end them
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not pid:
                break
            if (command := commands.pop(pid, None)) is not None:
                command.send(EXIT, exit_code(status))
                if by_fd.pop(command.conn.fileno(), None) is not None:
                    poll.unregister(command.conn)
                command.conn.close()
                last = time.monotonic()


def environ() -> dict[str, str]:
    """The environment this process was given (the engine's): not os.environ, to which
    python3 adds LC_CTYPE where no locale is set (PEP 538)."""
    with open("/proc/self/environ", "rb") as f:
        items = f.read().split(b"\0")
    env: dict[str, str] = {}
    for item in items:
        key, eq, value = os.fsdecode(item).partition("=")
        if eq and key not in env:
            env[key] = value
    return env


def main(argv: list[str]) -> int:
    """`paddock-agent SOCKET IDLE KEEP_HOME [FIRST]`, run by the engine as the box's root."""
    path, idle, keep_home = argv[0], float(argv[1]), argv[2] == "1"
    first = float(argv[3]) if len(argv) > 3 else idle
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("paddock-agent")  # not python3's: see agent.py _REEXEC
    env = environ()
    env.pop("PADDOCK_AGENT", None)
    if not keep_home:
        env.pop("HOME", None)  # runc's, for root: each command gets its own user's
    if os.fork():  # the engine's exec ends here; the agent goes on, the box's init its parent
        os._exit(0)
    os.setsid()
    # Bound by this very process: paddockd finds a command by the socket's peer, which is
    # who listened (SO_PEERCRED), and the command is this process's child.
    listening = listen(path)
    if listening is None:
        return 0
    server, inode = listening
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        serve(server, Agent(env, os.getcwd()), idle, first)
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:  # ours still, not a newer agent's
                os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
