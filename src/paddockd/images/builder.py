"""Builds the box image: a base (mmdebstrap + import, or a registry image), then each
layer in LAYERS as its own cached `docker build`. Later features append a layer."""

from __future__ import annotations

import hashlib
import json
import shutil
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
LAYERS = ["devtools", "user", "docker", "desktop", "agents", "browser", "ssh"]
PINS = Path(__file__).with_name("agents.json")
# The box image's label holding the recipe it was built from (`ImageBuilder.recipe`).
RECIPE_LABEL = "paddock.recipe"
RECIPE_FOR = 60.0  # seconds a read recipe is taken as current (status asks often)


def agent_build_args(pins: dict[str, dict[str, str]]) -> dict[str, str]:
    npm = dict(pins["npm"])
    node = npm.pop("node")
    versions = {**npm, **pins["pypi"], "node": node}
    return {
        "NODE_VERSION": node,
        "NPM_PACKAGES": " ".join(f"{name}@{version}" for name, version in npm.items()),
        "PIP_PACKAGES": " ".join(f"{name}=={version}" for name, version in pins["pypi"].items()),
        # A label value: no quotes or spaces to escape.
        "AGENT_VERSIONS": ",".join(f"{name}={version}" for name, version in versions.items()),
    }


def latest_versions(pins: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The registries' current versions of the pinned packages (node stays on its major)."""
    import urllib.request

    def fetch(url: str) -> dict[str, Any]:
        with urllib.request.urlopen(url, timeout=30) as resp:
            data: dict[str, Any] = json.loads(resp.read())
            return data

    npm = {}
    for name, version in pins["npm"].items():
        if name == "node":  # the latest of the same major: agents state a minimum
            major = version.split(".")[0]
            versions = fetch("https://registry.npmjs.org/node")["versions"]
            same = [v for v in versions if v.split(".")[0] == major and "-" not in v]
            npm[name] = max(same, key=lambda v: tuple(int(p) for p in v.split(".")))
        else:
            npm[name] = str(fetch(f"https://registry.npmjs.org/{name}/latest")["version"])
    pypi = {
        name: str(fetch(f"https://pypi.org/pypi/{name}/json")["info"]["version"])
        for name in pins["pypi"]
    }
    return {"npm": npm, "pypi": pypi}


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
        self._recipe: tuple[float, str] | None = None  # (when read, digest)
        # Versions chosen by --upgrade-agents on this server; the packaged pins otherwise.
        self._upgraded_pins = work_dir.parent / "agents.json"

    def recipe(self) -> str:
        """A digest of what the box image is built from: the packaged layers, the agents'
        pins, the mirrors and suite, the host's extra CA certificates. An image labelled
        with another was built by an older Paddock (or before a change on this host):
        a newer one is pending."""
        h = hashlib.sha256()
        h.update(
            json.dumps([self._cfg.suite, self._cfg.mirror, self._cfg.security_mirror]).encode()
        )
        h.update(json.dumps(self.pins(), sort_keys=True).encode())
        files = sorted(p for p in CONTEXT.rglob("*") if p.is_file())
        extra = Path(self._cfg.extra_ca_dir) if self._cfg.extra_ca_dir else None
        if extra is not None and extra.is_dir():
            files += sorted(extra.rglob("*.crt"))
        for path in files:
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        return h.hexdigest()[:32]

    async def pending(self) -> bool | None:
        """Whether the box image is older than this Paddock's recipe (None: no image, or
        a recipe that cannot be read: an unreadable CA file is the build's to report)."""
        labels = await self._engine.image_labels(self._cfg.name)
        if labels is None:
            return None
        now = time.monotonic()
        if self._recipe is None or now - self._recipe[0] > RECIPE_FOR:
            try:
                self._recipe = (now, await anyio.to_thread.run_sync(self.recipe))
            except OSError:
                return None
        return labels.get(RECIPE_LABEL) != self._recipe[1]

    def pins(self) -> dict[str, dict[str, str]]:
        path = self._upgraded_pins if self._upgraded_pins.exists() else PINS
        data = json.loads(path.read_text())
        return {"npm": dict(data["npm"]), "pypi": dict(data["pypi"])}

    async def build(
        self, no_cache: bool = False, rebuild_base: bool = False, upgrade_agents: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield progress events; the last one is {"done": true, ...}."""
        if upgrade_agents:
            yield {"step": "agents", "line": "looking up the agents' latest versions\n"}
            pins = await anyio.to_thread.run_sync(latest_versions, self.pins())
            self._upgraded_pins.parent.mkdir(parents=True, exist_ok=True)
            self._upgraded_pins.write_text(json.dumps(pins, indent=2) + "\n")
            for kind in ("npm", "pypi"):
                for name, version in pins[kind].items():
                    yield {"step": "agents", "line": f"  {name} {version}\n"}
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
            context = self._context()
            recipe = await anyio.to_thread.run_sync(self.recipe)
            self._recipe = (time.monotonic(), recipe)
            for i, layer in enumerate(LAYERS):
                last = i == len(LAYERS) - 1
                tag = self._cfg.name if last else f"paddock-layer-{layer}:latest"
                yield {"step": layer, "line": f"layer {i + 1}/{len(LAYERS)}: {layer}\n"}
                args = {
                    "FROM": parent,
                    **(agent_build_args(self.pins()) if layer == "agents" else {}),
                }
                labels = {RECIPE_LABEL: recipe} if last else None
                async for line in self._engine.build(
                    context, f"{layer}.Dockerfile", tag, args, no_cache, labels
                ):
                    yield {"step": layer, "line": line}
                parent = tag
            yield {
                "done": True,
                "image": self._cfg.name,
                "seconds": round(time.monotonic() - started, 1),
            }

    def _context(self) -> Path:
        """The build context: the packaged files plus the host's extra CA certificates
        (in `ca/`, copied only when they changed, so the layer cache holds)."""
        context = self._work_dir / "context"
        # copytree gives each copy its source's mode; what is written here gets one
        # explicitly, as paddockd's umask (077) would make it root's alone in the image.
        shutil.copytree(CONTEXT, context, dirs_exist_ok=True)
        ca = context / "ca"
        ca.mkdir(exist_ok=True)
        ca.chmod(0o755)
        wanted = {}
        if self._cfg.extra_ca_dir and Path(self._cfg.extra_ca_dir).is_dir():
            wanted = {p.name: p.read_bytes() for p in Path(self._cfg.extra_ca_dir).rglob("*.crt")}
        for old in ca.glob("*.crt"):
            if old.name not in wanted:
                old.unlink()
        for name, data in wanted.items():
            if not (ca / name).exists() or (ca / name).read_bytes() != data:
                (ca / name).write_bytes(data)
        (ca / "README").write_text("CA certificates the host added; trusted in boxes.\n")
        for public in ca.iterdir():
            public.chmod(0o644)
        return context

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
