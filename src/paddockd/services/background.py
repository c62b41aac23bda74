"""paddockd's background work, started and stopped with the app: the start-up recovery,
the reconcile passes (with the engine kept up and unreferenced images swept), the TTL
reaper, the egress log's flushes and the DNS filter. A failure in one round is logged and
the next round tries again; nothing here can stop paddockd from starting."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio.to_thread

from .. import logs, memory
from ..domain.errors import PaddockError
from ..netpolicy.base import NetworkRules, Resolver
from ..runtime.base import Runtime
from .audit import AuditService
from .box_events import BoxEvents
from .egress import EgressLog
from .image_sweep import ImageSweeper
from .pool import WarmPool
from .reaper import Reaper
from .reconciler import Reconciler
from .runs import RunService
from .system import SystemService
from .usage_history import INTERVAL as HISTORY_INTERVAL
from .usage_history import UsageHistory
from .webhooks import WebhookService

log = logging.getLogger("paddockd")


@dataclass(frozen=True)
class Schedule:
    reconcile: float  # seconds between passes
    reap: float
    egress: float = 1.0
    dns_address: str = ""  # where the DNS filter listens (the bridge's gateway)
    dns_port: int = 10053
    gateway_ports: tuple[int, int] = (10080, 10443)  # the credential gateway's (same address)


class Background:
    def __init__(
        self,
        schedule: Schedule,
        *,
        runtime: Runtime,
        network: NetworkRules,
        system: SystemService,
        reconciler: Reconciler,
        sweeper: ImageSweeper,
        reaper: Reaper,
        egress_log: EgressLog,
        resolver: Resolver,
        gateway: GatewayListener | None = None,
        runs: RunService,
        pool: WarmPool,
        audit: AuditService,
        history: UsageHistory | None = None,
        webhooks: WebhookService | None = None,
        box_events: BoxEvents | None = None,
        # Blocking: starts the box engine if it is down, and says whether it had to.
        restart_engine: Callable[[], bool] | None = None,
    ) -> None:
        self._schedule = schedule
        self._rt = runtime
        self._net = network
        self._system = system
        self._reconciler = reconciler
        self._sweeper = sweeper
        self._reaper = reaper
        self._egress = egress_log
        self._resolver = resolver
        self._gateway = gateway
        self._runs = runs
        self._pool = pool
        self._audit = audit
        self._history = history
        self._webhooks = webhooks
        self._box_events = box_events
        self._restart_engine = restart_engine
        self._tasks: list[asyncio.Task[None]] = []
        # Told of each pass and whether it failed (the metrics' counters).
        self.ran: Callable[[str, bool], None] = lambda name, failed: None

    async def start(self) -> None:
        try:
            await self._runs.recover()
        except Exception:  # nothing about old runs may stop a start
            log.exception("agent runs could not be recovered")
        try:
            await self._system.refresh_profile()
            await self._rt.ensure_network()
        except PaddockError as exc:
            log.error("engine: %s", exc.message)
        every = self._schedule
        self._tasks = [
            asyncio.create_task(
                _every(every.reconcile, self.reconcile_pass, "reconcile", self.ran)
            ),
            asyncio.create_task(self._reaper.run(every.reap)),
            asyncio.create_task(_every(every.egress, self.record_egress, "egress log", self.ran)),
            asyncio.create_task(_every(60, _rotate_log, "log rotation")),
            asyncio.create_task(_every(1.0, self._audit.flush, "audit log")),
            asyncio.create_task(_every(3600, self._audit.trim, "audit log retention")),
            asyncio.create_task(self._start_listeners()),
            asyncio.create_task(self._pool.run()),
        ]
        if self._history is not None:
            sample = _every(HISTORY_INTERVAL, self._history.sample, "usage history", self.ran)
            self._tasks.append(asyncio.create_task(sample))
        if self._box_events is not None:
            self._tasks.append(asyncio.create_task(_kept(self._box_events.run, "box events")))
        if self._webhooks is not None:
            self._tasks.append(asyncio.create_task(_kept(self._webhooks.run, "webhooks")))
            trim = _every(3600, self._webhooks.trim, "webhook log retention")
            self._tasks.append(asyncio.create_task(trim))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._resolver.close()
        if self._gateway is not None:
            await self._gateway.close()
        await self._egress.flush()
        with contextlib.suppress(Exception):
            await self._audit.flush()
        # Cleanups under way finish (a restart would finish them too, just later).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reconciler.drain(), 20)
            # Ready boxes stay for the next start to adopt; removals finish.
            await asyncio.wait_for(self._pool.drain(), 20)

    async def reconcile_pass(self) -> None:
        await self._keep_engine_up()
        await self._reconciler.reconcile_all()
        await self._sweeper.sweep()
        await self._runs.sweep()
        memory.give_back()  # what the last streams and pushes left in the heap

    async def record_egress(self) -> None:
        flows = await self._net.flows()
        self._egress.connections(
            flows, lambda ip: b.box_id if (b := self._net.box_at(ip)) else None
        )
        await self._egress.flush()

    async def _keep_engine_up(self) -> None:
        restart = self._restart_engine
        if restart is not None and await anyio.to_thread.run_sync(restart):
            log.warning("the box engine was down; started it")
            await self._system.refresh_profile()

    async def _start_listeners(self) -> None:
        """The DNS filter and the credential gateway, on the bridge's address."""
        address, schedule = self._schedule.dns_address, self._schedule
        await _retried("DNS filter", lambda: self._resolver.start(address, schedule.dns_port))
        gateway = self._gateway
        if gateway is not None:
            await _retried(
                "credential gateway", lambda: gateway.start(address, *schedule.gateway_ports)
            )


async def _retried(name: str, start: Callable[[], Awaitable[None]]) -> None:
    # Retried: the bridge (and so its address) may appear only once the engine is up.
    for _ in range(60):
        try:
            await start()
            return
        except OSError as exc:
            log.warning("%s: %s", name, exc)
            await asyncio.sleep(2)


class GatewayListener(Protocol):
    async def start(self, host: str, port: int, intercept_port: int) -> None: ...

    async def close(self) -> None: ...


async def _kept(job: Callable[[], Awaitable[None]], name: str) -> None:
    """A job that runs until cancelled, started again a second after it fails."""
    while True:
        try:
            await job()
        except Exception:
            log.exception("%s failed; starting again", name)
        await asyncio.sleep(1.0)


async def _rotate_log() -> None:
    logs.rotate_if_large()


async def _every(
    seconds: float,
    job: Callable[[], Awaitable[object]],
    name: str,
    ran: Callable[[str, bool], None] = lambda name, failed: None,
) -> None:
    while True:
        failed = True
        try:
            await job()
            failed = False
        except PaddockError as exc:
            log.error("%s: %s", name, exc.message)
        except Exception:
            log.exception("%s failed", name)
        ran(name, failed)
        await asyncio.sleep(seconds)
