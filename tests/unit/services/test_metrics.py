"""The metrics on fakes: what a scrape says, read by prometheus-client's own parser, and
every series the sample Grafana dashboard (deploy/grafana/paddock.json) charts exists."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from paddock.wire.models import (
    Capacity,
    EngineStatus,
    PoolStatus,
    PoolTypeStatus,
    ServerStatus,
)
from paddockd.config import DEFAULT_TYPES
from paddockd.domain.box import Box, BoxState
from paddockd.services.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "paddock.json"


def _metrics() -> Metrics:
    now = datetime.now(timezone.utc)
    boxes = [
        Box.of_type("a", "a", DEFAULT_TYPES["small"], "img", now),
        Box.of_type("b", "b", DEFAULT_TYPES["small"], "img", now),
    ]
    boxes[0] = replace(boxes[0], state=BoxState.RUNNING)

    async def all_boxes() -> list[Box]:
        return boxes

    async def status() -> ServerStatus:
        return ServerStatus(
            version="x",
            engine=EngineStatus(reachable=True, image="img"),
            capacity=Capacity(None, 1.0, 4096, 1024, 4.0, 1024, 3000),
            boxes_running=1,
            boxes_stopped=0,
            data_root_free_bytes=10,
            data_root_total_bytes=20,
            pool=PoolStatus(2, [PoolTypeStatus("small", 2, 1)], 1.0, 1024),
        )

    m = Metrics(all_boxes, status)
    # What happened: a create, a failed reconcile pass, a refused connection.
    m.call("POST", "/v1/boxes", 201, 0.3)
    m.ran("reconcile", failed=True)
    m.seen("connect", "denied")
    return m


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.anyio
async def test_a_scrape_says_what_is_true_now_and_what_happened() -> None:
    m = _metrics()
    seen = _samples((await m.scrape()).decode())
    assert seen[("paddock_boxes", frozenset({("state", "running"), ("type", "small")}))] == 1
    assert seen[("paddock_boxes", frozenset({("state", "creating"), ("type", "small")}))] == 1
    assert seen[("paddock_capacity_memory_mb", frozenset({("kind", "claimed")}))] == 1024
    assert seen[("paddock_host_memory_available_mb", frozenset())] == 3000
    assert seen[("paddock_pool_boxes", frozenset({("type", "small"), ("kind", "ready")}))] == 1
    calls = frozenset({("method", "POST"), ("route", "/v1/boxes"), ("status", "201")})
    assert seen[("paddock_api_calls_total", calls)] == 1
    assert seen[("paddock_background_errors_total", frozenset({("job", "reconcile")}))] == 1
    assert (
        seen[
            ("paddock_egress_events_total", frozenset({("kind", "connect"), ("verdict", "denied")}))
        ]
        == 1
    )


@pytest.mark.anyio
async def test_every_series_the_sample_dashboard_charts_exists() -> None:
    m = _metrics()
    names = {name for name, _ in _samples((await m.scrape()).decode())}
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]
    charted = {n for e in exprs for n in re.findall(r"\b(paddockd?_[a-z_]+)", e)}
    assert charted and charted <= names, charted - names


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
