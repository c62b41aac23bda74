"""The TypeScript SDK (sdk/typescript) against a real paddockd of the tests' own: `npm ci`, then
`npm test` with the server's URL and token in the environment, which builds the package and
runs its Node tests (unit, parity with the spec, the live box tests and the doc's examples)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .conftest import ROOT, Server

SDK = ROOT / "sdk" / "typescript"


@pytest.fixture(scope="module")
def npm() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("the TypeScript SDK's tests need node and npm (Node.js 20 or newer)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.lstrip("v").split(".")[0]) < 20:
        pytest.skip(f"the TypeScript SDK needs Node.js 20 or newer, not {version.strip()}")
    return npm


def test_typescript_sdk(server: Server, npm: str) -> None:
    # server.env: PADDOCK_URL and PADDOCK_TOKEN of this server, and a CLI config of its own.
    ci = subprocess.run(
        [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"],
        cwd=SDK,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ci.returncode == 0, f"npm ci failed:\n{ci.stdout}\n{ci.stderr}"
    done = subprocess.run(
        [npm, "test"], cwd=SDK, env=server.env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"npm test failed:\n{done.stdout[-30000:]}\n{done.stderr[-5000:]}"
    # With PADDOCK_URL set, the live tests must have run, not skipped.
    assert re.search(r"\bskipped 0\b", done.stdout), done.stdout[-3000:]
