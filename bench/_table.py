"""Timing helpers and the comparison table every benchmark prints."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


def median_seconds(
    fn: Callable[[], object],
    runs: int,
    setup: Callable[[], object] | None = None,
    teardown: Callable[[], object] | None = None,
) -> float:
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
        if teardown:
            teardown()
    return statistics.median(samples)


@dataclass
class Row:
    metric: str
    paddock: float
    raw: float | None
    unit: str
    target: str = ""
    higher_is_better: bool = False

    @property
    def ratio(self) -> float | None:
        return self.paddock / self.raw if self.raw else None


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.1f} ms"
    if unit == "n":  # a count: errors, bytes lost, boxes
        return f"{value:.0f}"
    return f"{value:.1f} {unit}"


def print_table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    header = f"{'metric':<46} {'paddock':>12} {'raw engine':>12} {'ratio':>7}  target"
    print(header)
    print("-" * len(header))
    for r in rows:
        raw = fmt(r.raw, r.unit) if r.raw is not None else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        print(f"{r.metric:<46} {fmt(r.paddock, r.unit):>12} {raw:>12} {ratio:>7}  {r.target}")
