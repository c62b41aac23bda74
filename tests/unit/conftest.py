"""Services wired on fakes (in-memory engine, recorded network) and a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from paddockd.api.deps import Services
from paddockd.config import Config
from paddockd.desktop.links import DesktopLinks
from paddockd.images.builder import ImageBuilder
from paddockd.netpolicy.fake import FakeNetwork
from paddockd.runtime.fake import FakeRuntime
from paddockd.services.agents import AgentService
from paddockd.services.boxes import BoxService
from paddockd.services.capacity import Capacity
from paddockd.services.credentials import CredentialService
from paddockd.services.desktop import DesktopService
from paddockd.services.drives import DriveService
from paddockd.services.egress import EgressLog, EgressService
from paddockd.services.reaper import Reaper
from paddockd.services.reconciler import Reconciler
from paddockd.services.runs import RunService
from paddockd.services.snapshots import SnapshotService
from paddockd.services.stats import StatsService
from paddockd.services.system import SystemService
from paddockd.store.boxes import BoxRepository
from paddockd.store.credentials import CredentialRepository
from paddockd.store.db import Database
from paddockd.store.tokens import TokenRepository


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class World:
    cfg: Config
    runtime: FakeRuntime
    network: FakeNetwork
    repo: BoxRepository
    reconciler: Reconciler
    boxes: BoxService
    reaper: Reaper
    services: Services
    clock: Clock
    token: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    cfg = replace(Config(), data_dir=tmp_path, capacity_cpus=4, capacity_memory_mb=3072)
    db = Database(cfg.db_url)
    db.migrate()
    runtime, network, clock = FakeRuntime(), FakeNetwork(), Clock()
    repo = BoxRepository(db)
    reconciler = Reconciler(
        repo,
        runtime,
        network,
        instance="test",
        boxes_dir=cfg.boxes_dir,
        stop_timeout=1,
        now=clock,
        retention=2,
    )
    drives = DriveService(repo, runtime, "test")
    boxes = BoxService(cfg, repo, runtime, reconciler, Capacity.from_config(cfg), clock, drives)
    tokens = TokenRepository(db)
    credentials = CredentialService(CredentialRepository(db, tmp_path / "credentials.key"), boxes)
    boxes.environment = credentials
    services = Services(
        config=cfg,
        boxes=boxes,
        system=SystemService(
            boxes,
            runtime,
            cfg.image.name,
            lambda: reconciler.isolation_failures,
            lambda: reconciler.view_problems,
            lxcfs_dir=cfg.engine.lxcfs_dir,
            data_root=str(tmp_path),
        ),
        tokens=tokens,
        images=ImageBuilder(cfg.image, runtime, tmp_path / "build"),
        snapshots=SnapshotService(repo, runtime, reconciler, boxes),
        drives=drives,
        egress=EgressService(boxes, EgressLog(cfg.boxes_dir, clock), frozenset({"10.213.0.1"})),
        desktop=DesktopService(boxes, reconciler.run_dir, DesktopLinks(tmp_path / "desktop.key")),
        credentials=credentials,
        agents=AgentService(runtime, cfg.image.name, credentials),
        runs=RunService(boxes, credentials, tmp_path / "runs"),
        stats=StatsService(boxes, runtime),
    )
    yield World(
        cfg,
        runtime,
        network,
        repo,
        reconciler,
        boxes,
        Reaper(boxes, clock),
        services,
        clock,
        tokens.create_sync("test"),
    )
    db.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
