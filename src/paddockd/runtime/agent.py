"""Commands started in a running box by its exec agent (runtime/agent_program.py), past
the engine: a fork in the box instead of a runc per command (docker exec is ~45 ms of an
exec's ~55 here, and grows with the number of boxes).

The agent is started by one engine exec after a box's second command within
`IDLE_SECONDS` (a box used now and then keeps the engine's exec), and leaves after
`IDLE_SECONDS` without one. Until it answers, and for anything it will not run exactly
as the engine would (a TTY; a user, program or folder it cannot use: it runs nothing and
says so), the engine's exec is used.

The box owns the agent, its socket and everything it says. Nothing here follows a name
in the box's run folder (the socket is opened by descriptor, checked to be a socket of
the box's root), the command's stdio are fresh pipes paddockd hands over, and all that
comes back is a frame of fixed size (the exit code) besides the command's output,
which is untrusted as the engine's exec output is. A box that answers for its agent with
something else only changes what its own commands appear to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..domain.errors import PaddockError
from . import agent_program, proctree
from .agent_program import EXIT, FRAME, KILL, REFUSED, STARTED
from .base import STDERR, STDOUT, ExecProcess, ExecSpec, ExecWrapper
from .feed import BOX_FOLDER

log = logging.getLogger(__name__)


# Lines of the two modules that the shipped program has once, or not at all.
_SHIPPED_APART = ("from __future__ import annotations", "from .proctree import end_tree")


def _program() -> str:
    """The agent's source as the box runs it: proctree's (its tree kill), then its own."""
    parts = []
    for module in (proctree, agent_program):
        text = Path(str(module.__file__)).read_text()
        parts.append("\n".join(line for line in text.splitlines() if line not in _SHIPPED_APART))
    return "from __future__ import annotations\n" + "\n".join(parts)


PROGRAM = _program()
# Named by the program's hash: after an upgrade paddockd never talks to an older agent,
# which leaves once idle.
SOCKET_NAME = ".paddock-agent-" + hashlib.sha256(PROGRAM.encode()).hexdigest()[:12]
IDLE_SECONDS = 300
# A warm pool's box has its agent started with it, waiting this long for its first
# command (the claimed box's), then IDLE_SECONDS between commands as any.
WARM_SECONDS = 3600
START_SECONDS = 30.0  # for the agent's answer to a request: a box frozen or swamped
RETRY_SECONDS = 120.0  # between starts of an agent that did not come (no python3?)
KILL_SECONDS = 10.0  # proctree's freeze and grace, and a margin
_CHUNK = 1 << 16


class Target(NamedTuple):
    """Where a container's agent listens (the host side of its run folder), and whether
    its image sets HOME itself (runc adds HOME only where the environment has none)."""

    folder: Path
    keep_home: bool


# The engine starts python3, which becomes `paddock-agent` (its command line and name):
# a user's `pkill python3` or `pkill -f python` in the box leaves it be.
_REEXEC = (
    "import os, sys\n"
    "if sys.version_info < (3, 9): sys.exit()\n"  # the agent's own needs; else the engine
    "env = open('/proc/self/environ', 'rb').read()\n"  # as given: no PEP 538 LC_CTYPE
    "env = dict(os.fsdecode(e).partition('=')[::2] for e in env.split(b'\\0') if b'=' in e)\n"
    "os.execve(sys.executable, ['paddock-agent', '-I', '-S', '-c', "
    "'import os; exec(os.environ.pop(\"PADDOCK_AGENT\"))', *sys.argv[1:]], env)"
)


def boot(target: Target, first: float = IDLE_SECONDS) -> ExecSpec:
    """The engine exec that starts a box's agent (as the box's root; it leaves at once),
    which waits `first` seconds for its first command."""
    # No shell first: the agent keeps the engine's environment as the engine gives it
    # (a shell exports it in an order of its own, and adds PWD). No python3: it fails to
    # start, and is tried again after RETRY_SECONDS.
    argv = [
        "python3",
        "-I",
        "-S",
        "-c",
        _REEXEC,
        f"{BOX_FOLDER}/{SOCKET_NAME}",
        str(IDLE_SECONDS),
        "1" if target.keep_home else "0",
        str(first),
    ]
    return ExecSpec(argv, {"PADDOCK_AGENT": PROGRAM}, "", "root")


def connect(folder: Path) -> socket.socket | None:
    """A connection to the agent in the run folder `folder`; None where none answers."""
    try:
        dirfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        node = os.open(SOCKET_NAME, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        os.close(dirfd)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        found, owner = os.fstat(node), os.fstat(dirfd)
        if not stat.S_ISSOCK(found.st_mode) or found.st_uid != owner.st_uid:
            raise OSError("not the agent's socket")
        sock.setblocking(False)
        sock.connect(f"/proc/self/fd/{node}")  # the inode checked, never a name again
    except OSError:
        sock.close()
        return None
    finally:
        os.close(node)
        os.close(dirfd)
    return sock


async def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < size:
        piece = await loop.sock_recv(sock, size - len(data))
        if not piece:
            break
        data += piece
    return data


async def _frame(sock: socket.socket) -> tuple[int, int] | None:
    """The agent's next frame (kind, value); None once it said nothing or hung up."""
    data = await _recv_exactly(sock, FRAME.size)
    return FRAME.unpack(data) if len(data) == FRAME.size else None


async def start(conn: socket.socket, spec: ExecSpec) -> AgentExec | None:
    """Ask the agent on `conn` to start `spec`; None when it will not (nothing ran: the
    engine is asked instead). Takes `conn` in any case."""
    body = json.dumps(
        {"argv": spec.cmd, "env": spec.env, "user": spec.user, "cwd": spec.workdir}
    ).encode()
    pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3 if spec.stdin else 2)]
    stdin = pipes.pop(0) if spec.stdin else None
    theirs = ([stdin[0]] if stdin else []) + [w for _, w in pipes]
    ours = ([stdin[1]] if stdin else []) + [r for r, _ in pipes]
    answer: tuple[int, int] | None = None
    sent = False
    try:
        with anyio.fail_after(START_SECONDS):
            socket.send_fds(conn, [struct.pack("!I", len(body))], theirs)
            await asyncio.get_running_loop().sock_sendall(conn, body)
            sent = True
            answer = await _frame(conn)
    except (OSError, TimeoutError):
        if not sent:
            return None  # it has no whole request: nothing ran, the engine's turn
        # It may have started the command: the engine must not run it a second time.
        raise PaddockError(
            "the box's exec agent did not say whether it started the command"
        ) from None
    finally:
        for fd in theirs:  # the agent has its own copies, or none
            os.close(fd)
        if answer is None or answer[0] != STARTED:  # cancelled too: nothing is kept
            for fd in ours:
                os.close(fd)
            conn.close()
    if answer is None or answer[0] != STARTED:
        if answer is not None and answer[0] == REFUSED:
            return None
        raise PaddockError("the box's exec agent hung up before starting the command")
    for fd in ours:
        os.set_blocking(fd, False)
    host = host_pid(conn, answer[1])
    return AgentExec(conn, ours[-2], ours[-1], stdin[1] if stdin else None, host)


class _Watches:
    """The event loop's watches on a command's pipes, so that a pipe is never closed
    while a task waits on it (the waiter is woken, and finds it gone)."""

    def __init__(self) -> None:
        self._waits: dict[int, tuple[asyncio.Future[None], bool]] = {}

    async def ready(self, fds: list[int], write: bool) -> None:
        """Until one of `fds` is ready, or closed by `close`."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        for fd in fds:
            (loop.add_writer if write else loop.add_reader)(fd, wake)
            self._waits[fd] = (ready, write)
        try:
            await ready
        finally:
            for fd in fds:
                if self._waits.get(fd, (None, write))[0] is ready:
                    self._unwatch(fd)

    def _unwatch(self, fd: int) -> None:
        future, write = self._waits.pop(fd)
        loop = asyncio.get_running_loop()
        (loop.remove_writer if write else loop.remove_reader)(fd)
        if not future.done():
            future.set_result(None)

    def close(self, fd: int) -> None:
        if fd in self._waits:
            self._unwatch(fd)
        os.close(fd)


class AgentExec:
    """A command the agent started: its output from paddockd's own pipes, its exit code
    from the agent. `host` is the command's host pid and start time, for a kill when the
    agent is gone."""

    def __init__(
        self,
        conn: socket.socket,
        out: int,
        err: int,
        stdin: int | None,
        host: tuple[int, str] | None = None,
    ) -> None:
        self._conn = conn
        self._streams = {out: STDOUT, err: STDERR}
        self._stdin = stdin
        self._host = host
        self._watches = _Watches()
        self._exit: asyncio.Task[int] | None = None

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        while self._streams:
            got = False
            for fd, kind in list(self._streams.items()):
                try:
                    data = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                got = True
                if not data:
                    del self._streams[fd]
                    self._watches.close(fd)
                    continue
                yield kind, data
            if got:
                await anyio.lowlevel.checkpoint()  # a command that never pauses holds no loop
            elif self._streams:
                await self._watches.ready(list(self._streams), write=False)

    async def wait(self) -> int:
        if self._exit is None:
            self._exit = asyncio.get_running_loop().create_task(self._read_exit())
        # Shielded: a waiter cancelled (kill's time limit) never loses the frame read.
        return await asyncio.shield(self._exit)

    async def _read_exit(self) -> int:
        frame = await _frame(self._conn)
        # An agent gone before the command's end (the box stopped, or its root ended it)
        # leaves the code unknown, as the engine's -1 does.
        return frame[1] if frame is not None and frame[0] == EXIT else -1

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self._stdin is not None:
            try:
                view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                await self._watches.ready([self._stdin], write=True)
            except BrokenPipeError:
                return  # the command stopped reading its input, as through the engine

    async def close_stdin(self) -> None:
        if self._stdin is not None:
            fd, self._stdin = self._stdin, None
            self._watches.close(fd)

    async def resize(self, cols: int, rows: int) -> None:
        pass  # no TTY: such commands go through the engine

    async def kill(self) -> None:
        ended = self._exit is not None and self._exit.done() and not self._exit.cancelled()
        if ended and self._exit is not None and self._exit.result() != -1:
            return  # it ended, and the agent said how
        with contextlib.suppress(OSError):
            await asyncio.get_running_loop().sock_sendall(self._conn, FRAME.pack(KILL, 0))
        code = -1
        with anyio.move_on_after(KILL_SECONDS):
            code = await self.wait()
        if code == -1 and self._host is not None:
            # The agent did not end it (gone, or unable to fork): from the host, as the
            # engine's exec is ended, by the pid it had at its start.
            pid, started = self._host
            if proctree.start_time(pid) == started:
                await anyio.to_thread.run_sync(proctree.end_tree, pid)

    async def close(self) -> None:
        for fd in list(self._streams):
            self._watches.close(fd)
        self._streams.clear()
        await self.close_stdin()
        if self._exit is not None and not self._exit.done():
            self._exit.cancel()
        self._conn.close()


def host_pid(conn: socket.socket, box_pid: int) -> tuple[int, str] | None:
    """The host pid and start time of the agent's child `box_pid` (as the box numbers
    it): a child of the socket's peer whose innermost pid is `box_pid`, in a pid
    namespace below the host's. None where there is none such (a forged answer)."""
    peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    try:
        with open(f"/proc/{peer}/task/{peer}/children") as f:
            children = [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None
    for child in children:
        try:
            with open(f"/proc/{child}/status") as f:
                line = next((ln for ln in f if ln.startswith("NSpid:")), "")
        except OSError:
            continue
        ids = line.split()[1:]
        if len(ids) >= 2 and ids[-1] == str(box_pid) and (started := proctree.start_time(child)):
            return child, started
    return None


class Agents:
    """Each running box's agent: used where it answers, started where it does not."""

    def __init__(self, launch: Callable[[str, float], Awaitable[None]]) -> None:
        # Starts a container's agent (a detached engine exec), to wait so long for its
        # first command.
        self._launch = launch
        self._used: dict[str, float] = {}  # container -> its last command by the engine
        self._tried: dict[str, float] = {}  # container -> when its agent was last started
        self._tasks: set[asyncio.Task[None]] = set()

    def used(self, cid: str) -> bool:
        """Whether the container had a command since it started (since paddockd did):
        only then may it have an agent."""
        return cid in self._used

    async def exec(self, target: Target, spec: ExecSpec) -> AgentExec | None:
        """`spec` started by the box's agent, or None: the engine's exec is for it."""
        if spec.tty:
            return None
        conn = connect(target.folder)
        if conn is None:
            return None
        return await start(conn, spec)

    def wanted(self, cid: str) -> None:
        """After a command by the engine: start the box's agent behind the caller, once
        the box had another within IDLE_SECONDS, unless one was started lately. A box
        given one command now and then does well with the engine's exec, and its agent
        would cost it an engine exec and ~10 MiB for nothing."""
        now = time.monotonic()
        before, self._used[cid] = self._used.get(cid), now
        if before is None or now - before > IDLE_SECONDS:
            return
        if now - self._tried.get(cid, -RETRY_SECONDS) < RETRY_SECONDS:
            return
        self._tried[cid] = now
        task = asyncio.get_running_loop().create_task(self._start(cid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, cid: str, first: float = IDLE_SECONDS) -> None:
        try:
            await self._launch(cid, first)
        except (PaddockError, OSError) as exc:
            log.info("no exec agent in %s: %s", cid[:12], exc)

    async def warm(self, cid: str) -> None:
        """Start the box's agent now, to wait WARM_SECONDS for its first command: a warm
        pool's box, whose claim's first command is then the agent's."""
        self._used[cid] = self._tried[cid] = time.monotonic()
        await self._start(cid, WARM_SECONDS)

    def forget(self, cid: str) -> None:
        self._tried.pop(cid, None)
        self._used.pop(cid, None)


class StartsAgent(ExecWrapper):
    """An engine exec after which the box's agent is wanted (started behind it: not
    beside the user's first command, which it would slow)."""

    def __init__(self, proc: ExecProcess, then: Callable[[], None]) -> None:
        super().__init__(proc)
        self._then = then

    async def close(self) -> None:
        await super().close()
        self._then()
