"""Builds the box image: a base (mmdebstrap + import, or a registry image), then each
layer in LAYERS as its own cached `docker build`. Later features append a layer."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from ..config import ImageConfig
from ..domain.errors import PaddockError
from ..runtime.base import ImageEngine

CONTEXT = Path(__file__).parent / "context"
# In build order; each is `context/<name>.Dockerfile`, built FROM the previous one.
LAYERS = ["devtools", "user", "docker", "desktop"]


def base_ref(cfg: ImageConfig) -> str:
    return f"paddock-base:{cfg.suite}"


def sources(cfg: ImageConfig) -> list[str]:
    return [
        f"deb {cfg.mirror} {cfg.suite} main",
        f"deb {cfg.mirror} {cfg.suite}-updates main",
        f"deb {cfg.security_mirror} {cfg.suite}-security main",
    ]


class ImageBuilder:
    def __init__(self, cfg: ImageConfig, engine: ImageEngine, work_dir: Path) -> None:
        self._cfg = cfg
        self._engine = engine
        self._work_dir = work_dir
        self._lock = anyio.Lock()

    async def build(
        self, no_cache: bool = False, rebuild_base: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield progress events; the last one is {"done": true, ...}."""
        if self._lock.locked():
            yield {"step": "wait", "line": "another image build is running; waiting for it\n"}
        async with self._lock:
            started = time.monotonic()
            base = base_ref(self._cfg)
            if rebuild_base or not await self._engine.image_exists(base):
                async for event in self._base(base):
                    yield event
            else:
                yield {
                    "step": "base",
                    "line": f"using existing {base} (--rebuild-base to refresh)\n",
                }
            parent = base
            for i, layer in enumerate(LAYERS):
                tag = self._cfg.name if i == len(LAYERS) - 1 else f"paddock-layer-{layer}:latest"
                yield {"step": layer, "line": f"layer {i + 1}/{len(LAYERS)}: {layer}\n"}
                async for line in self._engine.build(
                    CONTEXT, f"{layer}.Dockerfile", tag, {"FROM": parent}, no_cache
                ):
                    yield {"step": layer, "line": line}
                parent = tag
            yield {
                "done": True,
                "image": self._cfg.name,
                "seconds": round(time.monotonic() - started, 1),
            }

    async def _base(self, ref: str) -> AsyncIterator[dict[str, Any]]:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self._work_dir) as tmp:
            tarball = Path(tmp) / "base.tar"
            cmd = [
                "mmdebstrap",
                "--variant=minbase",
                "--include=ca-certificates",
                "--format=tar",
                self._cfg.suite,
                str(tarball),
                *sources(self._cfg),
            ]
            yield {"step": "base", "line": f"$ {' '.join(cmd[:5])} {self._cfg.suite} …\n"}
            try:
                process = await anyio.open_process(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
                )
            except FileNotFoundError:
                raise PaddockError("mmdebstrap is not installed; run ./install.sh") from None
            async with process:
                assert process.stdout is not None
                buf = b""
                async for chunk in process.stdout:
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        yield {"step": "base", "line": line.decode(errors="replace") + "\n"}
                code = await process.wait()
            if code != 0:
                raise PaddockError(f"mmdebstrap failed with exit code {code}")
            yield {"step": "base", "line": f"importing {ref}\n"}
            await self._engine.import_tarball(tarball, ref)
