"""paddockd's Prometheus metrics (`GET /metrics`, the owner's): counters fed as things
happen (each API call by route, background passes and their errors, egress seen), and
what is true now (boxes by state and type, capacity, the engine's disk, the warm pool,
paddockd's own CPU and memory) read at each scrape, so nothing runs between scrapes.

Labels are route templates, box states and types, job names: never a box's name, a
user's, or anything a caller chose, which would let anyone grow the series without end."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Awaitable, Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from paddock.wire.models import ServerStatus

from ..domain.box import Box

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: an exec of `true` takes tens of milliseconds, a create hundreds, a push of a
# large folder or a template build minutes.
_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    def __init__(
        self,
        boxes: Callable[[], Awaitable[list[Box]]],
        status: Callable[[], Awaitable[ServerStatus]],
    ) -> None:
        self._boxes = boxes
        self._status = status
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "paddock_api_calls",
            "API calls by method, route and status",
            ["method", "route", "status"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "paddock_api_call_seconds",
            "How long API calls took, by method and route (a stream: until it ended)",
            ["method", "route"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.background = Counter(
            "paddock_background_runs",
            "Background passes by job (reconcile, reaper, ...)",
            ["job"],
            registry=r,
        )
        self.background_errors = Counter(
            "paddock_background_errors",
            "Background passes that failed, by job",
            ["job"],
            registry=r,
        )
        self.egress = Counter(
            "paddock_egress_events",
            "Boxes' DNS answers and connections seen, by kind and verdict",
            ["kind", "verdict"],
            registry=r,
        )
        self._boxes_gauge = Gauge(
            "paddock_boxes", "Boxes by state and type", ["state", "type"], registry=r
        )
        self._capacity = Gauge(
            "paddock_capacity_memory_mb",
            "Memory running boxes may claim, and claim",
            ["kind"],
            registry=r,
        )
        self._cpus = Gauge("paddock_cpus_claimed", "CPUs running boxes claim", registry=r)
        self._host_memory = Gauge(
            "paddock_host_memory_available_mb", "The host's available memory", registry=r
        )
        self._disk = Gauge(
            "paddock_engine_disk_bytes", "The engine's data root", ["kind"], registry=r
        )
        self._pool = Gauge(
            "paddock_pool_boxes", "The warm pool, by type", ["type", "kind"], registry=r
        )
        self._engine = Gauge("paddock_engine_up", "Whether the box engine answers", registry=r)
        ProcessCollector(namespace="paddockd", registry=r)

    def call(self, method: str, route: str, status: int, seconds: float) -> None:
        self.calls.labels(method, route, str(status)).inc()
        self.call_seconds.labels(method, route).observe(seconds)

    def ran(self, job: str, failed: bool) -> None:
        self.background.labels(job).inc()
        if failed:
            self.background_errors.labels(job).inc()

    def seen(self, kind: str, verdict: str) -> None:
        self.egress.labels(kind, verdict).inc()

    async def scrape(self) -> bytes:
        boxes = await self._boxes()
        status = await self._status()
        self._boxes_gauge.clear()
        for (state, type_), n in Tally((b.state.value, b.type) for b in boxes).items():
            self._boxes_gauge.labels(state, type_).set(n)
        cap = status.capacity
        self._capacity.labels("total").set(cap.memory_total_mb)
        self._capacity.labels("claimed").set(cap.memory_used_mb)
        self._cpus.set(cap.cpus_used)
        if cap.memory_available_mb is not None:
            self._host_memory.set(cap.memory_available_mb)
        if status.data_root_free_bytes is not None:
            self._disk.labels("free").set(status.data_root_free_bytes)
        if status.data_root_total_bytes is not None:
            self._disk.labels("total").set(status.data_root_total_bytes)
        self._pool.clear()
        for t in status.pool.types if status.pool else ():
            self._pool.labels(t.type, "ready").set(t.ready)
            self._pool.labels(t.type, "size").set(t.size)
        self._engine.set(1 if status.engine.reachable else 0)
        return bytes(generate_latest(self.registry))
