"""Rendering for the CLI: tables, JSON, durations, a progress line on terminals."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T")


def emit_json(data: Any) -> None:
    from ..wire.models import to_wire

    print(json.dumps(to_wire(data), indent=2))


def note(message: str) -> None:
    """Human-facing text goes to stderr, so stdout stays clean for scripts."""
    print(message, file=sys.stderr)


def reply(as_json: bool, value: object, say: str | Callable[[], None]) -> int:
    """A command's outcome: `value` as JSON for scripts, else for a person `say`, a line
    (to stderr) or what prints it."""
    if as_json:
        emit_json(value)
    elif isinstance(say, str):
        note(say)
    else:
        say()
    return 0


def listing(
    items: Sequence[T],
    as_json: bool,
    headers: list[str],
    row: Callable[[T], list[str]],
    empty: str | None = None,
) -> int:
    """A `ls`: the items as JSON, or a table of a row each (`empty` said when none)."""
    if as_json:
        emit_json(items)
    elif not items and empty:
        note(empty)
    else:
        table(headers, [row(item) for item in items])
    return 0


def table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    for row in [headers, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 0:
        return "-" + duration(-seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            rest = seconds % size
            sub = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
            return f"{seconds // size}{unit}" + (
                f"{rest // sub[1]}{sub[0]}" if rest // sub[1] else ""
            )
    return f"{seconds}s"


def since(when: datetime | None) -> str:
    if when is None:
        return "-"
    return duration((datetime.now(timezone.utc) - when).total_seconds()) + " ago"


def until(when: datetime | None) -> str:
    if when is None:
        return "-"
    left = (when - datetime.now(timezone.utc)).total_seconds()
    return "in " + duration(left) if left > 0 else "now"


def binary_size(n: float) -> str:
    """Bytes in powers of 1024, as memory limits are set ("512 MiB", "1.0 GiB"): the one
    unit system of the CLI and the dashboard, transfers included."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB", "MiB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class ProgressLine:
    """`\\r`-updated transfer progress on stderr, only when stderr is a terminal."""

    def __init__(self, verb: str, total: int | None = None, enabled: bool | None = None) -> None:
        self.verb = verb
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._start = time.monotonic()
        self._last = 0.0

    def __call__(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last > 0.1:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._start, 1e-6)
        text = f"{self.verb} {binary_size(self.done)}"
        if self.total:
            text += f" / {binary_size(self.total)} {100 * self.done / self.total:3.0f}%"
        sys.stderr.write(f"\r{text}  {binary_size(rate)}/s   ")
        sys.stderr.flush()

    def finish(self) -> float:
        elapsed = time.monotonic() - self._start
        if self.enabled:
            self._draw(time.monotonic())
            sys.stderr.write("\n")
        return elapsed
