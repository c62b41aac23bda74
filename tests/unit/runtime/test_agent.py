"""The exec agent's parts that need no box: runc's reading of users and groups, the
environment, the program lookup; paddockd's side against a fake agent on a socket pair
(what the box may answer, and what it may have put in the run folder in the agent's
place). The agent in a real box: tests/integration/test_exec_agent.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from paddockd.domain.errors import PaddockError
from paddockd.runtime import agent
from paddockd.runtime.agent_program import (
    EXIT,
    FRAME,
    REFUSED,
    STARTED,
    Unknown,
    environment,
    exit_code,
    find_program,
    identity,
)
from paddockd.runtime.base import STDERR, STDOUT, ExecSpec

PASSWD = """root:x:0:0:root:/root:/bin/bash
# a comment
abc:x:1000:1000::/config:/bin/bash
broken:x:notanumber:1::/:/bin/sh
nohome:x:1001:1001::
"""
GROUP = """root:x:0:
docker:x:102:abc,other
users:x:100:abc
abc:x:1000:
odd:x:nope:abc
"""


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("root", (0, 0, [0], "/root")),
        ("abc", (1000, 1000, [100, 102, 1000], "/config")),
        ("1000", (1000, 1000, [100, 102, 1000], "/config")),  # a uid finds its name
        ("4242", (4242, 0, [0], "/")),  # unknown but numeric: runc's defaults
        ("abc:root", (1000, 0, [0], "/config")),  # a group given: no memberships
        ("abc:102", (1000, 102, [102], "/config")),
        ("abc:4343", (1000, 4343, [4343], "/config")),
        ("root:docker", (0, 102, [102], "/root")),
        ("nohome", (1001, 1001, [1001], "/")),
    ],
)
def test_a_user_is_who_runc_finds(spec: str, expected: tuple[int, int, list[int], str]) -> None:
    assert identity(spec, PASSWD, GROUP) == expected


@pytest.mark.parametrize("spec", ["nosuch", "abc:nosuchgroup", "broken", "abc:odd", "", ":0"])
def test_a_user_or_group_runc_would_not_find_is_refused(spec: str) -> None:
    with pytest.raises(Unknown):
        identity(spec, PASSWD, GROUP)


def test_the_environment_is_the_engines_with_the_request_on_top() -> None:
    base = {"PATH": "/bin", "HOSTNAME": "h", "LANG": "C"}
    env = environment(base, {"HOSTNAME": "x", "FOO": "1"}, "/config")
    assert list(env.items()) == [
        ("PATH", "/bin"), ("HOSTNAME", "x"), ("LANG", "C"), ("FOO", "1"), ("HOME", "/config"),
    ]  # fmt: skip
    assert environment(base, {"HOME": "/mine"}, "/config")["HOME"] == "/mine"


def test_a_program_is_found_as_gos_lookpath_finds_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "tool").write_text("")  # no execute bit: skipped
    (tmp_path / "a" / "dir").mkdir(mode=0o755)  # a folder: skipped
    (tmp_path / "b" / "tool").write_text("")
    (tmp_path / "b" / "tool").chmod(0o755)
    path = f"relative:{tmp_path}/a:{tmp_path}/b"
    assert find_program("tool", {"PATH": path}) == f"{tmp_path}/b/tool"
    assert find_program("./x", {}) == "./x"
    for name, env in (("dir", {"PATH": path}), ("tool", {}), ("tool", {"PATH": "relative"})):
        with pytest.raises(FileNotFoundError):
            find_program(name, env)


def test_a_signal_ends_a_command_with_128_plus_its_number() -> None:
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert exit_code(status) == 137
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    assert exit_code(os.waitpid(pid, 0)[1]) == 3


def test_the_shipped_program_is_one_module_without_relative_imports() -> None:
    assert "from ." not in agent.PROGRAM
    assert agent.PROGRAM.count("from __future__") == 1
    code = compile(agent.PROGRAM, "paddock-agent", "exec")
    names = set(code.co_names)
    assert {"end_tree", "serve", "identity"} <= names
    assert agent.SOCKET_NAME.startswith(".paddock-agent-")


# -- paddockd's side against a fake agent -----------------------------------------------
FakeAgent = Callable[[socket.socket, dict[str, object], list[int]], None]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _run(
    fake: FakeAgent, spec: ExecSpec, then: Callable[[agent.AgentExec | None], object]
) -> object:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)

    def box_side() -> None:
        head, fds, _, _ = socket.recv_fds(theirs, 4, 3)
        size = struct.unpack("!I", head)[0]
        body = b""
        while len(body) < size:
            body += theirs.recv(size - len(body))
        try:
            fake(theirs, json.loads(body), fds)
        finally:
            for fd in fds:
                os.close(fd)

    async def main() -> object:
        proc = await agent.start(ours, spec)
        try:
            return await then(proc)  # type: ignore[misc]
        finally:
            if proc is not None:
                await proc.close()

    box = threading.Thread(target=box_side)
    box.start()
    try:
        return anyio.run(main)
    finally:
        box.join()
        theirs.close()


SPEC = ExecSpec(["echo", "hi"], {"A": "1"}, "/w", "abc")


def test_a_started_command_gives_its_output_and_exit_code() -> None:
    seen: list[object] = []

    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        seen.append(request)
        seen.append(len(fds))
        conn.sendall(FRAME.pack(STARTED, 0))
        os.write(fds[0], b"out")
        os.write(fds[1], b"err")
        conn.sendall(FRAME.pack(EXIT, 7))

    async def then(proc: agent.AgentExec | None) -> object:
        assert proc is not None
        got = [item async for item in proc.output()]
        return sorted(got), await proc.wait(), await proc.wait()

    before = _open_fds()
    assert _run(fake, SPEC, then) == ([(STDOUT, b"out"), (STDERR, b"err")], 7, 7)
    assert seen == [{"argv": ["echo", "hi"], "env": {"A": "1"}, "user": "abc", "cwd": "/w"}, 2]
    assert _open_fds() == before  # every pipe and the connection closed


def test_stdin_goes_to_the_command_and_ends_when_closed() -> None:
    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.sendall(FRAME.pack(STARTED, 0))
        data = b""
        while piece := os.read(fds[0], 65536):
            data += piece
        os.write(fds[1], data[::-1])
        conn.sendall(FRAME.pack(EXIT, 0))

    async def then(proc: agent.AgentExec | None) -> object:
        assert proc is not None
        await proc.write(b"abc" * 100000)
        await proc.close_stdin()
        out = b"".join([d async for _, d in proc.output()])
        return len(out), out[:3], await proc.wait()

    spec = ExecSpec(["cat"], {}, "", "abc", stdin=True)
    assert _run(fake, spec, then) == (300000, b"cba", 0)


def test_a_refusal_means_the_engine_is_asked_and_nothing_is_left_open() -> None:
    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.sendall(FRAME.pack(REFUSED, 0))

    async def then(proc: agent.AgentExec | None) -> object:
        return proc

    before = _open_fds()
    assert _run(fake, SPEC, then) is None
    assert _open_fds() == before


@pytest.mark.parametrize("answer", [b"", b"\x4d\x00\x00\x00\x01", b"\x01\x00"])
def test_an_agent_that_answers_otherwise_is_an_error_not_a_second_run(answer: bytes) -> None:
    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.sendall(answer)
        conn.shutdown(socket.SHUT_WR)

    async def then(proc: agent.AgentExec | None) -> object:
        return proc

    before = _open_fds()
    with pytest.raises(PaddockError, match="agent hung up"):
        _run(fake, SPEC, then)
    assert _open_fds() == before


def test_an_agent_that_never_answers_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent, "START_SECONDS", 0.2)

    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.recv(1)  # until paddockd gives up and hangs up

    async def then(proc: agent.AgentExec | None) -> object:
        return proc

    with pytest.raises(PaddockError, match="did not say whether"):
        _run(fake, SPEC, then)


def test_an_exit_lost_with_the_agent_reads_as_unknown() -> None:
    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.sendall(FRAME.pack(STARTED, 0) + b"\x03\x00")  # half a frame, then gone
        conn.shutdown(socket.SHUT_WR)

    async def then(proc: agent.AgentExec | None) -> object:
        assert proc is not None
        return [x async for x in proc.output()], await proc.wait()

    assert _run(fake, SPEC, then) == ([], -1)


# -- what the box may have put in its run folder in the agent's place -------------------
def _listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)
    return sock


def test_connect_reaches_only_a_socket_of_the_folders_owner(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    name = folder / agent.SOCKET_NAME
    assert agent.connect(folder) is None  # nothing there

    elsewhere = _listening(tmp_path / "host.sock")  # a socket outside the folder
    name.symlink_to(tmp_path / "host.sock")
    assert agent.connect(folder) is None  # never followed
    elsewhere.setblocking(False)
    with pytest.raises(BlockingIOError):
        elsewhere.accept()
    name.unlink()

    os.mkfifo(name)
    assert agent.connect(folder) is None
    name.unlink()

    served = _listening(name)
    conn = agent.connect(folder)
    assert conn is not None
    conn.close()
    if os.geteuid() == 0:  # a socket of another owner than the folder's
        os.chown(name, 4242, 4242, follow_symlinks=False)
        assert agent.connect(folder) is None
    served.close()
    elsewhere.close()


def test_a_caller_cancelled_while_the_agent_starts_leaves_nothing_open() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)
    before = _open_fds()

    async def main() -> None:
        with anyio.move_on_after(0.2):
            await agent.start(ours, SPEC)  # the agent reads, and says nothing
        raise AssertionError("not cancelled")

    with pytest.raises(AssertionError, match="not cancelled"):
        anyio.run(main)
    assert ours.fileno() == -1  # taken and closed
    theirs.close()
    assert _open_fds() == before - 2  # both ends gone, and no pipe left


def test_closing_the_input_wakes_a_write_waiting_on_it() -> None:
    def fake(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        conn.sendall(FRAME.pack(STARTED, 0))
        conn.recv(1)  # reads no input at all, until paddockd hangs up

    async def then(proc: agent.AgentExec | None) -> object:
        assert proc is not None

        async def close_soon() -> None:
            await anyio.sleep(0.1)
            await proc.close_stdin()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(close_soon)
                await proc.write(b"x" * (4 << 20))  # more than a pipe holds: it waits
        await proc.write(b"more")  # after the close: dropped, as through the engine
        return "woken"

    before = _open_fds()
    assert _run(fake, ExecSpec(["cat"], {}, "", "abc", stdin=True), then) == "woken"
    assert _open_fds() == before


def test_an_agent_is_started_for_a_box_used_again_and_not_twice_in_a_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    clock = [1000.0]
    monkeypatch.setattr(agent, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    async def launch(cid: str, first: float) -> None:
        assert first == agent.IDLE_SECONDS
        started.append(cid)

    async def main() -> None:
        agents = agent.Agents(launch)
        assert not agents.used("c1")
        agents.wanted("c1")  # a first command: the engine's exec will do
        assert agents.used("c1")
        clock[0] += agent.IDLE_SECONDS + 1
        agents.wanted("c1")  # another, but long after
        await anyio.sleep(0)
        assert started == []
        clock[0] += 1
        agents.wanted("c1")  # used again soon: its agent is started
        agents.wanted("c1")  # and not again while that one may be coming
        await anyio.sleep(0.01)
        assert started == ["c1"]
        clock[0] += agent.RETRY_SECONDS + 1
        agents.wanted("c1")  # it never came (no python3?): tried again, later
        await anyio.sleep(0.01)
        assert started == ["c1", "c1"]
        agents.forget("c1")  # its container started again: a first command once more
        agents.wanted("c1")
        await anyio.sleep(0.01)
        assert started == ["c1", "c1"]

    anyio.run(main)


def test_a_warm_pools_box_has_its_agent_from_the_start_waiting_for_its_claim() -> None:
    started: list[tuple[str, float]] = []

    async def launch(cid: str, first: float) -> None:
        started.append((cid, first))

    async def main() -> None:
        agents = agent.Agents(launch)
        await agents.warm("c1")
        assert started == [("c1", agent.WARM_SECONDS)]
        assert agents.used("c1")  # its first command goes to the agent
        agents.wanted("c1")  # nor is another started behind that command
        await anyio.sleep(0.01)
        assert started == [("c1", agent.WARM_SECONDS)]

    anyio.run(main)
    spec = agent.boot(agent.Target(Path("/run/x"), False), agent.WARM_SECONDS)
    assert spec.cmd[-3:] == [str(agent.IDLE_SECONDS), "0", str(agent.WARM_SECONDS)]
