"""The official `e2b` npm SDK (the version pinned in tests/e2b-npm/package-lock.json) against a
real paddockd of the tests' own: `npm ci` when node_modules is not what the lockfile says (so
a machine that has installed it once runs offline), then `node --test` on e2b.test.mjs with
the server's URLs and a token in E2B_* variables."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ..harness import e2b_env
from .conftest import ROOT, Server

HERE = ROOT / "tests" / "e2b-npm"
# The SDK's own floor (its package.json `engines`).
NODE_MIN = (20, 18, 1)


@pytest.fixture(scope="module")
def npm() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("the e2b npm SDK's tests need node and npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    have = tuple(int(p) for p in version.lstrip("v").split(".")[:3])
    if have < NODE_MIN:
        pytest.skip(f"the e2b npm SDK needs Node.js {'.'.join(map(str, NODE_MIN))}+, not {version}")
    return npm


def installed(folder: Path) -> bool:
    """Whether node_modules holds the lockfile's packages: npm's own record of what it
    installed (node_modules/.package-lock.json) has each at the locked version. An optional
    one may be absent (npm skips those this Node cannot run, e.g. undici 8 below Node 22)."""
    try:
        want = json.loads((folder / "package-lock.json").read_text())["packages"]
        have = json.loads((folder / "node_modules" / ".package-lock.json").read_text())["packages"]
    except (OSError, ValueError, KeyError):
        return False
    return all(
        have[path].get("version") == p.get("version") if path in have else bool(p.get("optional"))
        for path, p in want.items()
        if path
    )


def test_e2b_npm_sdk(server: Server, npm: str) -> None:
    if not installed(HERE):
        ci = subprocess.run(
            [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert ci.returncode == 0, f"npm ci failed:\n{ci.stdout}\n{ci.stderr}"
    assert installed(HERE)
    env = {**server.env, **e2b_env(server)}
    done = subprocess.run(
        [npm, "test"], cwd=HERE, env=env, capture_output=True, text=True, timeout=600
    )
    out = done.stdout[-30000:]
    assert done.returncode == 0, f"the e2b npm tests failed:\n{out}\n{done.stderr[-5000:]}"
    # Every test ran (none skipped or left out).
    assert re.search(r"\bpass 10\b", out) and re.search(r"\bskipped 0\b", out), out[-3000:]
