"""Every Python example in the README and docs/sdk-python.md runs against a live server, as
a reader would paste it: in a project folder, with the CLI's settings (so `Client()` finds
the server and `"current"` is a box of the test's). A wrong example fails the suite."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import ROOT, Server

DOCS = [ROOT / "README.md", ROOT / "docs" / "sdk-python.md"]


def python_blocks() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
        found += [(f"{doc.name}#{i}", b) for i, b in enumerate(blocks) if "Client" in b]
    return found


@pytest.mark.parametrize(("where", "code"), python_blocks(), ids=[w for w, _ in python_blocks()])
def test_example_runs(server: Server, tmp_path: Path, where: str, code: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # A project as the README's reader has one: `npm ci && npm test` works in it, offline.
    for name in ("package.json", "package-lock.json", ".npmrc", "math.js", "math.test.js"):
        (project / name).write_bytes((ROOT / "examples" / "node-pass" / name).read_bytes())
    current = f"doc-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", current, "--ttl", "600", check=True)
    settings = tmp_path / "cli.json"
    settings.write_text(json.dumps({"url": server.url, "token": server.token, "current": current}))
    env = {**server.env, "PADDOCK_CONFIG": str(settings)}
    with server.client() as c:
        before = {b.id for b in c.list_boxes()}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
        if "npm ci && npm test" in code:  # what it prints is what the reader expects
            assert done.stdout.startswith("0 "), done.stdout
    finally:
        with server.client() as c:
            for box in c.list_boxes():
                if box.id not in before or box.name == current:
                    c.delete_box(box.id, force=True)
