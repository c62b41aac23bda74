"""The box image's recipe label: an image from an older recipe shows as pending in the
server's status until it is built again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paddockd.config import ImageConfig
from paddockd.images import builder as builder_module
from paddockd.images.builder import RECIPE_LABEL, ImageBuilder
from paddockd.runtime.fake import FakeRuntime

from .conftest import World

pytestmark = pytest.mark.anyio


async def _build(builder: ImageBuilder) -> None:
    async for _ in builder.build():  # over the base image the engine has
        pass


async def test_an_image_from_another_recipe_is_pending_until_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(builder_module, "RECIPE_FOR", 0.0)  # read afresh each time
    engine = FakeRuntime()
    engine.images.add("paddock-base:bookworm")
    builder = ImageBuilder(ImageConfig(extra_ca_dir=""), engine, tmp_path / "build")
    assert await builder.pending() is True  # built before images were labelled
    await _build(builder)
    assert engine.labels["paddock-box:latest"] == {RECIPE_LABEL: builder.recipe()}
    assert await builder.pending() is False
    # The agents' versions changed on this host (`image build --upgrade-agents`).
    pins = builder.pins()
    pins["npm"]["node"] = "0.0.1"
    (tmp_path / "agents.json").write_text(json.dumps(pins))
    assert await builder.pending() is True
    await _build(builder)
    assert await builder.pending() is False
    engine.images.discard("paddock-box:latest")
    assert await builder.pending() is None  # no image: nothing is pending, it is missing


async def test_the_status_says_a_newer_image_is_pending(world: World) -> None:
    status = await world.services.system.status()
    assert status.engine.image_present and status.engine.image_pending is True
    world.runtime.images.add("paddock-base:bookworm")
    async for _ in world.services.images.build():
        pass
    assert (await world.services.system.status()).engine.image_pending is False
