"""Services wired as production wires them, on fakes (in-memory engine, recorded network)
and a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from paddockd.api.deps import Services
from paddockd.config import Config, EngineConfig
from paddockd.domain.accounts import User
from paddockd.netpolicy.fake import FakeNetwork
from paddockd.runtime.fake import FakeRuntime
from paddockd.services.boxes import BoxService
from paddockd.services.reaper import Reaper
from paddockd.services.reconciler import Reconciler
from paddockd.store.boxes import BoxRepository
from paddockd.store.db import Database
from paddockd.wiring import Wired, wire

from ..servers import uvicorn_thread


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
    db: Database
    wired: Wired


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """Production's wiring (wiring.wire) with the engine and the network swapped for fakes."""
    cfg = replace(
        Config(),
        data_dir=tmp_path,
        instance="test",
        stop_timeout=1,
        snapshot_retention=2,
        capacity_cpus=4,
        capacity_memory_mb=3072,
        engine=replace(EngineConfig(), data_root=str(tmp_path)),
    )
    runtime, network, clock = FakeRuntime(), FakeNetwork(), Clock()
    wired = wire(cfg, runtime=runtime, network=network, now=clock)
    yield World(
        cfg,
        runtime,
        network,
        wired.repo,
        wired.reconciler,
        wired.services.boxes,
        wired.reaper,
        wired.services,
        clock,
        wired.services.tokens.create_sync("test"),
        wired.db,
        wired,
    )
    wired.db.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class People:
    """The accounts of `people`: an owner (ada) and two members (bob, carol)."""

    owner: User
    bob: User
    carol: User


async def join(world: World, username: str) -> User:
    """A member, joined by an invitation as a person would."""
    link, _, _ = await world.services.members.invite()
    token = link.rsplit("/", 1)[1]
    return await world.services.accounts.create_account(
        "invite", token, username, PASSWORD, PASSWORD
    )


@pytest.fixture
async def people(world: World) -> People:
    setup = world.services.accounts.new_setup_link()
    owner = await world.services.accounts.create_owner(setup, "ada", PASSWORD, PASSWORD)
    return People(owner, await join(world, "bob"), await join(world, "carol"))


@contextmanager
def serve_api(world: World, **tls: str) -> Iterator[int]:
    """paddockd's API on the world's fakes, served by uvicorn on a free loopback port, for
    clients that need a real socket (the CLI in a subprocess, proxies, WebSockets)."""
    from paddockd.api.app import create_app

    with uvicorn_thread(create_app(world.services), **tls) as port:
        yield port
