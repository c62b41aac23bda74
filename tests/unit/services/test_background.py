"""The background service, on production's wiring with fakes: it always starts, and a
reconcile pass also sweeps unreferenced images."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from paddockd.config import Config, NetworkConfig
from paddockd.netpolicy.fake import FakeNetwork
from paddockd.runtime.base import LABEL_INSTANCE
from paddockd.runtime.fake import FakeRuntime
from paddockd.wiring import wire

from ..conftest import Clock

pytestmark = pytest.mark.anyio


def _loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_start_survives_a_torn_run_record_and_a_pass_sweeps(tmp_path: Path) -> None:
    # The DNS filter listens on loopback only.
    network = NetworkConfig(bridge="lo", bridge_cidr="127.0.0.1/8", dns_port=_loopback_port())
    cfg = replace(Config(), data_dir=tmp_path, instance="test", network=network)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "abc123.json").write_text('{"id": "abc1')
    runtime = FakeRuntime()
    wired = wire(cfg, runtime=runtime, network=FakeNetwork(), now=Clock())
    orphan = "paddock-snapshots/gone:1"
    runtime.images.add(orphan)
    runtime.labels[orphan] = {LABEL_INSTANCE: "test"}
    try:
        await wired.background.start()
        assert (tmp_path / "runs" / "abc123.json.broken").exists()
        await wired.background.reconcile_pass()
        assert orphan not in runtime.images and "paddock-box:latest" in runtime.images
    finally:
        await wired.background.stop()
        wired.db.close()


def test_a_half_faked_wiring_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="in pairs"):
        wire(replace(Config(), data_dir=tmp_path), runtime=FakeRuntime())
