"""Agent runs on fakes: the command line, the key that goes with it, and the run record."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from paddockd.domain.errors import InvalidRequest, InvalidState
from paddockd.domain.runs import Run, headless
from paddockd.store.runs import RunRepository

from ..conftest import World

pytestmark = pytest.mark.anyio
KEY = "sk-ant-fake-0123456789"


async def test_a_run_gets_only_its_providers_key_and_is_recorded(world: World) -> None:
    services = world.services
    await services.credentials.set("anthropic", KEY)
    await services.credentials.set("openai", "sk-openai-fake-0123456789")
    await world.boxes.create("r", None, None, None)
    run = await services.runs.start("r", "claude", "say hi", "/config/w", None)
    events = [e async for e in services.runs.follow(run.id)]
    spec = world.runtime.execs[-1]
    # The key stays outside: the run gets the box's placeholder and the gateway's URL.
    assert spec.env["ANTHROPIC_API_KEY"].startswith("sk-paddock-") and KEY not in str(spec)
    assert spec.env["ANTHROPIC_BASE_URL"] == "http://10.213.0.1/anthropic"
    assert "OPENAI_API_KEY" not in spec.env
    assert spec.env["DISABLE_AUTOUPDATER"] == "1" and spec.workdir == "/config/w"
    assert spec.cmd[:3] == ["setsid", "-w", "/bin/sh"] and spec.cmd[-2:] == ["--", "say hi"]
    assert "claude -p" in str(events[0]["data"])
    assert events[-1] == {"seq": 2, "status": "succeeded", "exit_code": 0}
    done = await services.runs.get(run.id)
    assert done.status == "succeeded" and done.exit_code == 0 and done.ended_at
    assert [r.id for r in await services.runs.list("r")] == [run.id]


async def test_runs_refuse_clearly(world: World) -> None:
    runs = world.services.runs
    await world.boxes.create("r", None, None, None)
    with pytest.raises(InvalidRequest, match="paddock auth set anthropic"):
        await runs.start("r", "claude", "hi", None, None)
    await world.services.credentials.set("anthropic", KEY)
    with pytest.raises(InvalidRequest, match="unknown agent"):
        await runs.start("r", "gpt-pilot", "hi", None, None)
    with pytest.raises(InvalidRequest, match="no instruction"):
        await runs.start("r", "claude", "  ", None, None)
    await world.boxes.stop("r")
    with pytest.raises(InvalidState, match="resume"):
        await runs.start("r", "claude", "hi", None, None)


async def test_recover_marks_orphaned_runs_lost(world: World) -> None:
    await world.services.credentials.set("anthropic", KEY)
    await world.boxes.create("r", None, None, None)
    runs = world.services.runs
    run = await runs.start("r", "claude", "hi", None, None)
    await asyncio.sleep(0.05)
    await RunRepository(world.db).save(replace(await runs.get(run.id), status="running"))
    await runs.recover()
    assert (await runs.get(run.id)).status == "lost"


def _legacy(box_id: str, run_id: str, status: str = "succeeded") -> Run:
    return Run(run_id, box_id, "r", "claude", "hi", "/config", None, status, time.time(), None, 0)


async def test_old_run_files_are_imported_and_broken_ones_set_aside(world: World) -> None:
    box = await world.boxes.create("r", None, None, None)
    folder = world.cfg.data_dir / "runs"
    folder.mkdir()
    (folder / "aaa111.json").write_text(_legacy(box.id, "aaa111").to_json())
    (folder / "bbb222.json").write_text(_legacy(box.id, "bbb222", "running").to_json())
    (folder / "ccc333.json").write_text(_legacy(box.id, "ccc333").to_json()[:40])  # torn
    (folder / "ddd444.json").write_bytes(b"\xff\xfe garbage")
    (folder / "eee555.json").write_text('{"id": "eee555"}')  # whole JSON, not a record
    runs = world.services.runs
    skipped = await runs.recover()
    assert sorted(s.split(":")[0] for s in skipped) == ["ccc333.json", "ddd444.json", "eee555.json"]
    assert [r.id for r in await runs.list("r")] == ["aaa111", "bbb222"]
    assert (await runs.get("bbb222")).status == "lost"  # nobody reads it any more
    assert sorted(p.name for p in folder.iterdir()) == [
        "ccc333.json.broken",
        "ddd444.json.broken",
        "eee555.json.broken",
    ]
    assert await runs.recover() == ()  # reported once


async def test_a_log_cut_short_is_read_to_its_last_whole_line(world: World) -> None:
    box = await world.boxes.create("r", None, None, None)
    folder = world.cfg.data_dir / "runs"
    folder.mkdir()
    (folder / "aaa111.json").write_text(_legacy(box.id, "aaa111", "running").to_json())
    (folder / "aaa111.log").write_bytes(
        b'{"seq": 1, "stream": "stdout", "data": "hello"}\n{"seq": 2, "str\xff'
    )
    await world.services.runs.recover()
    events = [e async for e in world.services.runs.follow("aaa111")]
    assert events == [
        {"seq": 1, "stream": "stdout", "data": "hello"},
        {"seq": 2, "status": "lost", "exit_code": 0},
    ]


def test_command_lines() -> None:
    assert headless("codex", "x", "gpt-5", False)[:2] == ["codex", "exec"]
    assert "--json" in headless("codex", "x", None, True)
    assert headless("opencode", "x", None, False)[:2] == ["opencode", "run"]
    assert headless("pi", "x", "m", True) == ["pi", "-p", "--mode", "json", "--model", "m", "x"]
    assert headless("kimi", "-x", None, False) == ["kimi", "--prompt=-x"]
    assert headless("prime", "-x", None, False)[-4:] == [
        "--stream",
        "--",
        "openai/gpt-4.1-mini",
        "-x",
    ]
    assert headless("kimi", "x", "kimi-k2", True) == [
        "env", "KIMI_MODEL_NAME=kimi-k2", "kimi", "--output-format", "stream-json", "--prompt=x",
    ]  # fmt: skip
    with pytest.raises(InvalidRequest):
        headless("claude", "x", "bad model name!", False)


def test_one_anthropic_base_url_serves_every_agent() -> None:
    from paddockd.domain.agents import AGENTS

    env = {"ANTHROPIC_BASE_URL": "http://10.0.0.5:8080/v1/"}
    assert AGENTS["claude"].adapt(env)["ANTHROPIC_BASE_URL"] == "http://10.0.0.5:8080"
    assert AGENTS["opencode"].adapt(env)["ANTHROPIC_BASE_URL"] == "http://10.0.0.5:8080/v1"
    plain = {"ANTHROPIC_BASE_URL": "http://10.0.0.5:8080"}
    assert AGENTS["opencode"].adapt(plain)["ANTHROPIC_BASE_URL"] == "http://10.0.0.5:8080/v1"


def test_kimi_reads_the_moonshot_key_under_its_own_names() -> None:
    from paddockd.domain.agents import AGENTS, shell_env

    env = {"MOONSHOT_API_KEY": "sk-m-0123456789", "MOONSHOT_BASE_URL": "http://10.0.0.5/v1"}
    kimi = AGENTS["kimi"].adapt(env)
    assert kimi["KIMI_MODEL_API_KEY"] == env["MOONSHOT_API_KEY"]
    assert kimi["KIMI_MODEL_BASE_URL"] == env["MOONSHOT_BASE_URL"]
    assert kimi["KIMI_MODEL_NAME"] and kimi["KIMI_MODEL_PROVIDER_TYPE"] == "kimi"
    # An attached Moonshot key reaches `kimi` in a shell too; other keys get nothing more.
    assert shell_env(env)["KIMI_MODEL_API_KEY"] == env["MOONSHOT_API_KEY"]
    openai = {"OPENAI_API_KEY": "sk-o-0123456789"}
    assert shell_env(openai) == openai


async def test_the_boxs_default_agent_comes_before_the_servers(world: World) -> None:
    await world.services.credentials.set("openai", "sk-openai-fake-0123456789")
    box = await world.boxes.create("r", None, None, None, agent="codex")
    assert box.agent == "codex"
    run = await world.services.runs.start("r", None, "hi", None, None)
    assert run.agent == "codex" and world.runtime.execs[-1].cmd[6:8] == ["codex", "exec"]
    fork = await world.services.snapshots.fork("r", "r2", None)
    assert fork.agent == "codex"
    with pytest.raises(InvalidRequest, match="unknown agent"):
        await world.boxes.create("odd", None, None, None, agent="nope")


async def test_a_run_that_floods_keeps_a_bounded_log_and_ends_normally(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent is the box's program: what it prints is not all kept on the server's disk."""
    from collections.abc import AsyncIterator

    from paddockd.runtime.fake import FakeExec

    class Flood(FakeExec):
        async def output(self) -> AsyncIterator[tuple[int, bytes]]:
            for _ in range(64):
                yield 1, b"y" * (64 << 10)  # 4 MiB in all

    async def exec_(cid: str, spec: object) -> Flood:
        return Flood(spec)  # type: ignore[arg-type]

    monkeypatch.setattr("paddockd.services.runs.MAX_LOG", 1 << 20)
    await world.services.credentials.set("anthropic", KEY)
    await world.boxes.create("r", None, None, None)
    monkeypatch.setattr(world.runtime, "exec", exec_)
    run = await world.services.runs.start("r", "claude", "say hi", None, None)
    events = [e async for e in world.services.runs.follow(run.id)]
    assert "no more is kept" in str(events[-2]["data"])
    assert events[-1]["status"] == "succeeded"
    size = (world.services.runs._log(run.id)).stat().st_size
    assert size < (1 << 20) + (128 << 10), size


async def test_a_boxs_runs_are_bounded_in_number_and_bytes_and_go_with_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs were capped one by one but not in number, never deleted (not with the box), so
    a box that started runs in a loop filled the server's disk."""
    monkeypatch.setattr("paddockd.services.runs.MAX_RUNS", 3)
    await world.services.credentials.set("anthropic", KEY)
    box = await world.boxes.create("r", None, None, None)
    runs = world.services.runs
    made = []
    for _ in range(5):
        made.append((await runs.start("r", "claude", "hi", None, None)).id)
        [e async for e in runs.follow(made[-1])]  # until it ended
    kept = [r.id for r in await runs.list("r")]
    assert kept == made[-3:]
    assert not runs._log(made[0]).exists()
    monkeypatch.setattr("paddockd.services.runs.LOG_BUDGET", 1)  # every ended log is too big
    made.append((await runs.start("r", "claude", "hi", None, None)).id)
    assert [r.id for r in await runs.list("r")] == [made[-1]]
    [e async for e in runs.follow(made[-1])]
    await world.boxes.delete(box.id, force=True)
    await world.reconciler.drain()
    assert await runs.sweep() == 1
    assert list((world.cfg.data_dir / "runs").glob("*.log")) == []


async def test_a_box_runs_few_runs_at_once(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("paddockd.services.runs.MAX_RUNNING", 1)
    await world.services.credentials.set("anthropic", KEY)
    await world.boxes.create("r", None, None, None)
    run = await world.services.runs.start("r", "claude", "hi", None, None)
    [e async for e in world.services.runs.follow(run.id)]  # it ended; now say it runs on
    await RunRepository(world.db).save(
        replace(await world.services.runs.get(run.id), status="running")
    )
    with pytest.raises(InvalidState, match="at most 1 at once"):
        await world.services.runs.start("r", "claude", "hi", None, None)
