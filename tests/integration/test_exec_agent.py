"""The exec agent (runtime/agent.py) against the engine's exec, in one real box: each case
runs both ways and what the command saw and how it ended must be the same, byte for byte
(pids and pipe numbers aside). Where the agent will not run a command (no such user,
program or folder) it runs nothing, and the runtime's exec gives the engine's answer."""

from __future__ import annotations

import difflib
import time
import uuid
from collections.abc import Iterator

import anyio
import pytest

from paddockd.runtime import agent
from paddockd.runtime.base import STDOUT, ExecProcess, ExecSpec
from paddockd.runtime.docker import DockerRuntime

from ..harness import ENGINE_SOCKET
from .conftest import Server

pytestmark = pytest.mark.timeout(300)

Result = tuple[int, bytes, bytes]


@pytest.fixture(scope="module")
def boxed(server: Server) -> Iterator[tuple[DockerRuntime, str, agent.Target]]:
    name = f"ag-{uuid.uuid4().hex[:6]}"
    with server.client() as c:
        box = c.create_box(name, ttl=900)
    rt = DockerRuntime(ENGINE_SOCKET)
    cid = f"paddock-{box.id}"

    async def ready() -> agent.Target:
        target = await rt.agent_target(cid)
        assert target is not None
        await _wanted(rt, cid)
        with anyio.fail_after(30):
            while (conn := agent.connect(target.folder)) is None:
                await anyio.sleep(0.05)
        conn.close()
        return target

    try:
        yield rt, cid, anyio.run(ready)
    finally:
        with server.client() as c:
            c.delete_box(name, force=True)


async def _wanted(rt: DockerRuntime, cid: str) -> None:
    """Two commands by the engine: a box used again, whose agent is then started."""
    for _ in range(2):
        await _gather(await rt.exec(cid, ExecSpec(["true"], {}, "", "abc")))


async def _gather(proc: ExecProcess, stdin: bytes | None = None) -> Result:
    out, err = bytearray(), bytearray()

    async def feed(data: bytes) -> None:
        await proc.write(data)
        await proc.close_stdin()

    try:
        async with anyio.create_task_group() as tg:
            if stdin is not None:
                tg.start_soon(feed, stdin)
            async for kind, data in proc.output():
                (out if kind == STDOUT else err).extend(data)
        return await proc.wait(), bytes(out), bytes(err)
    finally:
        await proc.close()


def _same(agents: Result, engine: Result) -> None:
    """Equal, or a failure that shows the lines that differ."""
    if agents == engine:
        return
    lines = []
    for name, a, e in (("stdout", agents[1], engine[1]), ("stderr", agents[2], engine[2])):
        lines += difflib.unified_diff(
            e.decode(errors="replace").splitlines(),
            a.decode(errors="replace").splitlines(),
            f"engine {name}",
            f"agent {name}",
            lineterm="",
        )
    pytest.fail(f"exit {agents[0]} (engine {engine[0]})\n" + "\n".join(lines[:80]))


def _both(
    boxed: tuple[DockerRuntime, str, agent.Target], spec: ExecSpec, stdin: bytes | None = None
) -> tuple[Result, Result]:
    rt, cid, target = boxed

    async def run() -> tuple[Result, Result]:
        engine = await _gather(await rt.engine_exec(cid, spec), stdin)
        conn = agent.connect(target.folder)
        assert conn is not None, "the agent is not answering"
        proc = await agent.start(conn, spec)
        assert proc is not None, f"the agent refused {spec}"
        return engine, await _gather(proc, stdin)

    return anyio.run(run)


SEEN = r"""
echo "home=$HOME pwd=$(pwd) umask=$(umask)"
grep -E '^(Uid|Gid|Groups|Cap...|NoNewPrivs|Seccomp|SigBlk|SigIgn|SigCgt):' /proc/self/status
cat /proc/self/cgroup /proc/self/oom_score_adj /proc/self/limits
echo "stdin=$(readlink /proc/self/fd/0)"
# Descriptors the shell was given beyond stdio, by its builtin test: a listing by `ls`
# would race the shell's own pipe for the listing's output.
fd=3; while [ $fd -lt 64 ]; do [ -e /proc/$$/fd/$fd ] && echo "open $fd"; fd=$((fd + 1)); done
[ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && echo "session leader"
[ "$(ps -o pgid= -p $$ | tr -d ' ')" = "$$" ] && echo "group leader"
env | grep -v '^_=' | sort
id
"""


@pytest.mark.parametrize(
    "user", ["abc", "root", "1000", "4242", "abc:root", "1000:102", "root:abc", "abc:4343"]
)
def test_a_command_sees_what_it_sees_through_the_engine(
    boxed: tuple[DockerRuntime, str, agent.Target], user: str
) -> None:
    spec = ExecSpec(["/bin/sh", "-c", SEEN], {"PADDOCK_BOX": "x", "FOO": "a b"}, "/tmp", user)
    engine, agents = _both(boxed, spec)
    assert engine[0] == 0, engine
    _same(agents, engine)


def test_its_environment_and_folder_default_as_the_engines(
    boxed: tuple[DockerRuntime, str, agent.Target],
) -> None:
    spec = ExecSpec(["sh", "-c", "pwd; env | grep -v '^_=' | sort"], {}, "", "abc")
    engine, agents = _both(boxed, spec)
    assert b"HOME=/config" in engine[1]
    _same(agents, engine)
    # A HOME of the caller's wins over the user's, and PATH finds the program.
    spec = ExecSpec(["env"], {"HOME": "/elsewhere", "PATH": "/usr/bin:/bin"}, "/", "root")
    engine, agents = _both(boxed, spec)
    assert b"HOME=/elsewhere" in engine[1]
    _same(agents, engine)


@pytest.mark.parametrize(
    "script", ["exit 3", "kill -9 $$", "kill -TERM $$", "echo out; echo err >&2; exit 1"]
)
def test_it_ends_as_through_the_engine(
    boxed: tuple[DockerRuntime, str, agent.Target], script: str
) -> None:
    engine, agents = _both(boxed, ExecSpec(["sh", "-c", script], {}, "/", "abc"))
    _same(agents, engine)


def test_input_output_and_a_background_job_holding_the_output(
    boxed: tuple[DockerRuntime, str, agent.Target],
) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    spec = ExecSpec(["sh", "-c", "cat; head -c 3000000 /dev/zero >&2"], {}, "/", "abc", stdin=True)
    engine, agents = _both(boxed, spec, data)
    assert engine == (0, data, b"\0" * 3000000) and agents == engine
    # The output ends when the last holder of it does, not when the command does.
    began = time.monotonic()
    engine, agents = _both(boxed, ExecSpec(["sh", "-c", "sleep 1 & echo hi"], {}, "/", "abc"))
    assert time.monotonic() - began > 2 and agents == engine == (0, b"hi\n", b"")
    # A daemon that lets go of the output holds nothing of it (no other descriptor).
    began = time.monotonic()
    daemon = "setsid sleep 5 </dev/null >/dev/null 2>&1 & echo hi"
    engine, agents = _both(boxed, ExecSpec(["sh", "-c", daemon], {}, "/", "abc"))
    assert time.monotonic() - began < 4 and agents == engine == (0, b"hi\n", b"")


async def _tree(target: agent.Target, marker: str) -> agent.AgentExec:
    """Through the agent: a shell with two sleeps named by `marker`, once it runs."""
    spec = ExecSpec(
        ["sh", "-c", f"sleep {marker}1 & sleep {marker}2 & echo up; wait"], {}, "/", "abc"
    )
    conn = agent.connect(target.folder)
    assert conn is not None
    proc = await agent.start(conn, spec)
    assert proc is not None
    assert await proc.output().__anext__() == (STDOUT, b"up\n")
    return proc


async def _processes(rt: DockerRuntime, cid: str) -> bytes:
    return (
        await _gather(await rt.engine_exec(cid, ExecSpec(["ps", "-eo", "args"], {}, "/", "root")))
    )[1]


def test_kill_ends_the_whole_tree(boxed: tuple[DockerRuntime, str, agent.Target]) -> None:
    rt, cid, target = boxed

    async def run() -> None:
        proc = await _tree(target, "432")
        await proc.kill()
        assert await proc.wait() == 143
        await proc.close()
        assert b"sleep 432" not in await _processes(rt, cid)

    anyio.run(run)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (ExecSpec(["nosuchprog"], {}, "/", "abc"), b"nosuchprog: command not found\n"),
        (ExecSpec(["/no/such"], {}, "/", "abc"), b"/no/such: no such file or directory\n"),
        (ExecSpec(["/etc/passwd"], {}, "/", "abc"), b"/etc/passwd: permission denied\n"),
        (
            ExecSpec(["true"], {}, "/nope", "abc"),
            b"cannot use /nope as the working directory: no such file or directory\n",
        ),
        (ExecSpec(["true"], {}, "/", "nosuchuser"), b"no user nosuchuser in the box\n"),
        (ExecSpec(["true"], {}, "/root", "abc"), None),
    ],
)
def test_what_it_cannot_start_it_leaves_to_the_engine(
    boxed: tuple[DockerRuntime, str, agent.Target], spec: ExecSpec, said: bytes | None
) -> None:
    rt, cid, target = boxed

    async def run() -> tuple[Result, Result]:
        conn = agent.connect(target.folder)
        assert conn is not None
        assert await agent.start(conn, spec) is None  # refused: nothing ran
        return (
            await _gather(await rt.engine_exec(cid, spec)),
            await _gather(await rt.exec(cid, spec)),
        )

    engine, through_runtime = anyio.run(run)
    _same(through_runtime, engine)
    if said is not None:  # else the engine runs it: runc enters the folder as root
        assert engine[0] in (126, 127) and engine[2] == said


def test_it_leaves_once_idle_and_is_started_again(
    boxed: tuple[DockerRuntime, str, agent.Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cid, target = boxed
    monkeypatch.setattr(agent, "IDLE_SECONDS", 1)
    monkeypatch.setattr(agent, "SOCKET_NAME", agent.SOCKET_NAME + "-idle")
    rt2 = DockerRuntime(ENGINE_SOCKET)

    async def run() -> None:
        await _wanted(rt2, cid)
        with anyio.fail_after(30):
            while (conn := agent.connect(target.folder)) is None:
                await anyio.sleep(0.05)
        conn.close()
        assert isinstance(await rt2.exec(cid, ExecSpec(["true"], {}, "", "abc")), agent.AgentExec)
        with anyio.fail_after(30):  # it leaves, and takes its socket along
            while (target.folder / agent.SOCKET_NAME).exists():
                await anyio.sleep(0.2)

    anyio.run(run)


def test_a_command_whose_agent_is_gone_is_still_killed_from_the_host(
    boxed: tuple[DockerRuntime, str, agent.Target],
) -> None:
    rt, cid, target = boxed

    async def run() -> None:
        proc = await _tree(target, "433")
        gone = await _gather(
            await rt.engine_exec(cid, ExecSpec(["pkill", "-x", "paddock-agent"], {}, "/", "root"))
        )
        assert gone[0] == 0
        assert await proc.wait() == -1  # its exit code went with the agent
        await proc.kill()
        await proc.close()
        assert b"sleep 433" not in await _processes(rt, cid)
        # The next command goes to the engine and brings the agent back (a runtime that
        # has not started one lately).
        await _wanted(DockerRuntime(ENGINE_SOCKET), cid)
        with anyio.fail_after(30):
            while (again := agent.connect(target.folder)) is None:
                await anyio.sleep(0.05)
        again.close()

    anyio.run(run)
