"""Coding agents in real boxes: the real agent CLIs, run by `paddock prompt` against a fake
model provider in the tests' internet namespace (no real provider is reachable here)."""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..netlab import ALLOWED, TestInternet
from .conftest import Server

PORT = 8080
BASE_URL = f"http://{ALLOWED}:{PORT}"
KEY = f"sk-ant-fake-{uuid.uuid4().hex}"


class FakeModel:
    def __init__(self, internet: TestInternet, log: Path) -> None:
        self.log = log
        log.touch()
        script = Path(__file__).parents[1] / "fakemodel.py"
        internet.spawn(sys.executable, str(script), str(PORT), str(log))
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection((ALLOWED, PORT), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the fake model API did not start"
                time.sleep(0.1)

    def requests(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


@pytest.fixture(scope="module")
def model(workdir: Path) -> Iterator[FakeModel]:
    internet = TestInternet(workdir)
    yield FakeModel(internet, workdir / "fakemodel.jsonl")
    internet.close()


@pytest.fixture(scope="module")
def agent_box(server: Server, model: FakeModel) -> Iterator[str]:
    name = f"agent-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--type", "medium", check=True)
    done = server.cli(
        "auth", "set", "anthropic", "--from-stdin", "--base-url", BASE_URL, stdin=KEY.encode()
    )
    assert done.returncode == 0, done.stderr
    yield name
    server.cli("rm", "--force", name)
    server.cli("auth", "rm", "anthropic")


@pytest.mark.parametrize("command", ["claude", "codex", "opencode", "pi", "prime", "kimi"])
def test_each_agent_runs_for_the_box_user(server: Server, agent_box: str, command: str) -> None:
    done = server.cli("exec", agent_box, "--", command, "--version")
    # (pi prints its version on stderr)
    assert done.returncode == 0 and (done.stdout + done.stderr).strip(), (command, done.stderr)


def test_agents_lists_versions_and_keys(server: Server, agent_box: str) -> None:
    agents = {a["name"]: a for a in json.loads(server.cli("agents", "--json", check=True).stdout)}
    assert agents["claude"]["version"] and agents["claude"]["credentials"]
    assert not agents["codex"]["credentials"]


def test_claude_answers_with_the_key_set_by_auth(
    server: Server, agent_box: str, model: FakeModel
) -> None:
    before = len(model.requests())
    done = server.cli("prompt", agent_box, "--agent", "claude", "Say something.")
    assert done.returncode == 0, done.stderr
    assert "FAKE-ANSWER" in done.stdout
    sent = [r for r in model.requests()[before:] if str(r["path"]).startswith("/v1/messages")]
    assert sent and all(r["key"] == KEY for r in sent)


def test_claude_carries_out_a_tool_call(server: Server, agent_box: str) -> None:
    server.cli("exec", agent_box, "--", "mkdir", "-p", "/config/work", check=True)
    done = server.cli(
        "prompt",
        agent_box,
        "--agent",
        "claude",
        "--workdir",
        "/config/work",
        "WRITE /config/work/hello.txt banana",
    )
    assert done.returncode == 0, done.stderr
    assert "DONE banana" in done.stdout
    assert (
        server.cli("exec", agent_box, "--", "cat", "/config/work/hello.txt").stdout.strip()
        == "banana"
    )


@pytest.mark.parametrize("agent", ["opencode", "pi"])
def test_other_agents_answer_and_carry_out_a_tool_call(
    server: Server, agent_box: str, model: FakeModel, agent: str
) -> None:
    """The same `auth set` base URL serves OpenCode (AI SDK: /v1 in the URL), Pi (its
    models.json, written by Paddock) and Claude Code (which appends /v1 itself)."""
    before = len(model.requests())
    done = server.cli("prompt", agent_box, "--agent", agent, "Say something.")
    assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, (done.stdout, done.stderr)
    sent = [r for r in model.requests()[before:] if str(r["path"]).endswith("/messages")]
    assert sent and all(r["key"] == KEY for r in sent)
    target = f"/config/{agent}.txt"
    done = server.cli(
        "prompt", agent_box, "--agent", agent, "--workdir", "/config", f"WRITE {target} kiwi"
    )
    assert done.returncode == 0 and "DONE kiwi" in done.stdout, (done.stdout, done.stderr)
    assert server.cli("exec", agent_box, "--", "cat", target).stdout.strip() == "kiwi"


@contextmanager
def provider_key(server: Server, provider: str) -> Iterator[str]:
    """A key for this provider, set with `auth set` and pointed at the fake API's /v1."""
    key = f"sk-{provider}-fake-0123456789"
    server.cli(
        "auth", "set", provider, "--from-stdin", "--base-url", f"{BASE_URL}/v1",
        stdin=key.encode(), check=True,
    )  # fmt: skip
    try:
        yield key
    finally:
        server.cli("auth", "rm", provider)


@pytest.fixture
def openai_key(server: Server) -> Iterator[str]:
    """For the Codex tests."""
    with provider_key(server, "openai") as key:
        yield key


def test_codex_answers_through_its_own_provider_setting(
    server: Server, agent_box: str, model: FakeModel, openai_key: str
) -> None:
    """Codex takes a custom endpoint only as a provider option; Paddock passes it."""
    before = len(model.requests())
    done = server.cli("prompt", agent_box, "--agent", "codex", "Say something.")
    assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, (
        done.stdout,
        done.stderr[-2000:],
    )
    sent = [r for r in model.requests()[before:] if str(r["path"]).endswith("/responses")]
    assert sent and all(r["key"] == f"Bearer {openai_key}" for r in sent)


def test_codex_carries_out_a_tool_call(server: Server, agent_box: str, openai_key: str) -> None:
    """Codex's one tool runs JavaScript that calls its nested tools; the fake API's script
    uses apply_patch, Codex's own way to write a file."""
    done = server.cli(
        "prompt", agent_box, "--agent", "codex", "--workdir", "/config",
        "WRITE /config/codex.txt pear",
    )  # fmt: skip
    assert done.returncode == 0 and "DONE pear" in done.stdout, (done.stdout, done.stderr[-2000:])
    assert server.cli("exec", agent_box, "--", "cat", "/config/codex.txt").stdout.strip() == "pear"


def test_kimi_answers_and_carries_out_a_tool_call(
    server: Server, agent_box: str, model: FakeModel
) -> None:
    """Kimi Code against the Moonshot (OpenAI-compatible) API: the key set by `auth set
    moonshot`, the model named with --model, a scripted write; then, with the key attached
    to the box, `kimi` run straight from a shell."""
    with provider_key(server, "moonshot") as key:
        before = len(model.requests())
        done = server.cli(
            "prompt", agent_box, "--agent", "kimi", "--model", "kimi-fake", "Say something."
        )
        assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, (done.stdout, done.stderr)
        sent = [r for r in model.requests()[before:] if str(r["path"]).endswith("/completions")]
        assert sent and all(r["key"] == f"Bearer {key}" for r in sent)
        assert all(r["body"]["model"] == "kimi-fake" for r in sent)  # type: ignore[index]
        done = server.cli(
            "prompt", agent_box, "--agent", "kimi", "--workdir", "/config",
            "WRITE /config/kimi.txt mango",
        )  # fmt: skip
        assert done.returncode == 0 and "DONE mango" in done.stdout, (done.stdout, done.stderr)
        assert server.cli("exec", agent_box, "--", "cat", "/config/kimi.txt").stdout.strip() == (
            "mango"
        )
        server.cli("auth", "attach", agent_box, "moonshot", check=True)
        done = server.cli("exec", agent_box, "--", "kimi", "--prompt=Say something.")
        assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, (done.stdout, done.stderr)


def test_prime_answers_with_the_key_set_by_auth(
    server: Server, agent_box: str, model: FakeModel
) -> None:
    """Prime's CLI is no coding agent: `prompt --agent prime` is a one-shot chat with a
    Prime Inference model, here at the base URL given to `auth set prime`."""
    with provider_key(server, "prime") as key:
        before = len(model.requests())
        done = server.cli("prompt", agent_box, "--agent", "prime", "Say something.")
        assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, (done.stdout, done.stderr)
        sent = [r for r in model.requests()[before:] if str(r["path"]).endswith("/completions")]
        assert sent and all(r["key"] == f"Bearer {key}" for r in sent)


def test_mcp_prompt_runs_an_agent(server: Server, agent_box: str) -> None:
    import anyio

    from .test_mcp import mcp_session, text_of

    async def ask() -> dict[str, object]:
        with anyio.fail_after(180):
            async with mcp_session(server) as session:
                result = await session.call_tool(
                    "prompt", {"box": agent_box, "instruction": "Say something.", "agent": "claude"}
                )
                assert not result.is_error, text_of(result)
                return dict(json.loads(text_of(result)))

    out = anyio.run(ask)
    assert out["exit_code"] == 0 and "FAKE-ANSWER" in str(out["stdout"])


def test_detach_follow_and_list(server: Server, agent_box: str) -> None:
    run_id = server.cli(
        "prompt", agent_box, "--agent", "claude", "--detach", "Say something.", check=True
    ).stdout.strip()
    followed = server.cli("runs", "follow", run_id, check=True)
    assert "FAKE-ANSWER" in followed.stdout
    runs = json.loads(server.cli("runs", agent_box, "--json", check=True).stdout)
    mine = next(r for r in runs if r["id"] == run_id)
    assert mine["status"] == "succeeded" and mine["agent"] == "claude"
    assert "FAKE-ANSWER" in server.cli("runs", "show", run_id, check=True).stdout


def test_stop_ends_a_run(server: Server, agent_box: str, openai_key: str) -> None:
    """Codex waits on a model that does not answer; `runs stop` ends it."""
    run_id = server.cli(
        "prompt", agent_box, "--agent", "codex", "--detach", "SLOW please", check=True
    ).stdout.strip()
    time.sleep(5)
    shown = json.loads(server.cli("runs", "show", run_id, "--json", check=True).stdout)
    log = server.cli("runs", "show", run_id)
    assert shown["status"] == "running", (log.stdout[-800:], log.stderr[-1500:])
    assert server.cli("exec", agent_box, "--", "pgrep", "-f", "codex exec").returncode == 0
    server.cli("runs", "stop", run_id, check=True)
    shown = json.loads(server.cli("runs", "show", run_id, "--json", check=True).stdout)
    assert shown["status"] == "stopped"
    assert server.cli("exec", agent_box, "--", "pgrep", "-f", "codex exec").returncode == 1


def test_prompt_refuses_clearly(server: Server, agent_box: str) -> None:
    done = server.cli("prompt", agent_box, "--agent", "codex", "hi")
    assert done.returncode == 1 and "paddock auth set openai" in done.stderr
    done = server.cli("prompt", agent_box, "--agent", "nope", "hi")
    assert done.returncode == 1 and "unknown agent" in done.stderr
    stopped = f"st-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", stopped, check=True)
    server.cli("stop", stopped, check=True)
    try:
        done = server.cli("prompt", stopped, "--agent", "claude", "hi")
        assert done.returncode == 1 and "resume" in done.stderr
    finally:
        server.cli("rm", "--force", stopped)


def test_the_key_is_nowhere_it_should_not_be(server: Server, agent_box: str) -> None:
    import docker

    from .conftest import ENGINE_SOCKET

    assert KEY not in server.cli("auth", "ls", "--json", check=True).stdout
    assert KEY.encode() not in (server.dir / "data" / "paddock.db").read_bytes()
    assert KEY not in (server.dir / "paddockd.log").read_text()
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    for c in server.containers():
        assert KEY not in json.dumps(api.inspect_container(c["Id"]))
