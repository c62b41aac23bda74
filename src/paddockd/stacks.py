"""What paddockd is doing right now, for a server that seems stuck: `kill -USR1 <pid>`
writes every thread's stack to its log (faulthandler, which works even when the event
loop is blocked), `kill -USR2 <pid>` every asyncio task's (from the loop, so only when
it still turns). Nothing else reads these signals."""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import signal
import sys

log = logging.getLogger("paddockd.stacks")
# A server with thousands of streams open would write megabytes into its log (and the
# dashboard's live log): the first tasks, and so many characters, suffice.
_MAX_TASKS = 500
_MAX_CHARS = 256 << 10


def _chain(task: asyncio.Task[object]) -> list[str]:
    """Where the task waits, outermost first: its coroutine's awaits followed down (a
    task's own stack shows only the outermost frame of a suspended coroutine)."""
    where: list[str] = []
    step: object = task.get_coro()
    while step is not None and len(where) < 40:
        frame = next(
            (f for k in ("cr_frame", "ag_frame", "gi_frame") if (f := getattr(step, k, None))),
            None,
        )
        if frame is None:
            break
        where.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        step = next(
            (a for k in ("cr_await", "ag_await", "gi_yieldfrom") if (a := getattr(step, k, None))),
            None,
        )
    return where


def _tasks() -> None:
    tasks = list(asyncio.all_tasks())
    out = io.StringIO()
    shown = 0
    for task in tasks[:_MAX_TASKS]:
        if out.tell() > _MAX_CHARS:
            break
        out.write(f"{task.get_name()}:\n" + "\n".join(_chain(task)) + "\n")
        shown += 1
    log.warning("%d asyncio tasks, %d shown:\n%s", len(tasks), shown, out.getvalue())


def enable(loop: asyncio.AbstractEventLoop) -> None:
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    loop.add_signal_handler(signal.SIGUSR2, _tasks)
