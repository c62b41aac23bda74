"""Login throttling and device-login limits, with a real SQLite file and a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddockd.domain.errors import TooManyAttempts
from paddockd.services.accounts import FORGET_AFTER, Throttle
from paddockd.services.devices import MAX_WAITING, DeviceService
from paddockd.store.db import Database
from paddockd.store.devices import DeviceRepository
from paddockd.store.tokens import TokenRepository

pytestmark = pytest.mark.anyio


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_waits_grow_after_the_free_failures_and_a_success_clears_them() -> None:
    clock = Clock()
    throttle = Throttle(now=clock)
    for _ in range(3):
        throttle.failed("ip:a", "user:ada")
    assert throttle.wait("ip:a") == 0
    throttle.failed("ip:a", "user:ada")
    assert throttle.wait("user:ada") == 2.0
    throttle.failed("ip:a", "user:ada")
    assert throttle.wait("ip:b", "user:ada") == 4.0  # the username alone is enough
    throttle.succeeded("ip:a", "user:ada")
    assert throttle.wait("ip:a", "user:ada") == 0


def test_a_flood_of_made_up_names_does_not_grow_it_without_bound() -> None:
    clock = Clock()
    throttle = Throttle(now=clock, limit=100)
    for i in range(100):
        throttle.failed(f"user:{i}")
    clock.t += FORGET_AFTER + 1
    throttle.failed("user:new")
    assert len(throttle) == 1


@pytest.fixture
def devices(tmp_path: Path) -> DeviceService:
    db = Database(f"sqlite:///{tmp_path / 'p.db'}")
    db.migrate()
    return DeviceService(DeviceRepository(db), TokenRepository(db), lambda: "http://x")


async def test_one_address_cannot_fill_the_device_table(devices: DeviceService) -> None:
    for _ in range(MAX_WAITING):
        await devices.start("cli", "192.0.2.1")
    with pytest.raises(TooManyAttempts):
        await devices.start("cli", "192.0.2.1")
    await devices.start("cli", "192.0.2.2")  # others are not held up
