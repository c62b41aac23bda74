"""paddockd's stack dump on SIGUSR2 follows a task's awaits down to where it waits."""

from __future__ import annotations

import asyncio
import logging

import pytest

from paddockd import stacks


async def _inner(gate: asyncio.Event) -> None:
    await gate.wait()


async def _outer(gate: asyncio.Event) -> None:
    await _inner(gate)


@pytest.mark.anyio
async def test_a_waiting_task_shows_each_await(caplog: pytest.LogCaptureFixture) -> None:
    gate = asyncio.Event()
    task = asyncio.get_running_loop().create_task(_outer(gate), name="pdtest-waiter")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, "paddockd.stacks"):
        stacks._tasks()
    text = caplog.text
    mine = text[text.index("pdtest-waiter:") :]
    assert mine.index("in _outer") < mine.index("in _inner") < mine.index("in wait")
    gate.set()
    await task
