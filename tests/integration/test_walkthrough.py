"""The walkthrough from the product spec, exactly as a user types it."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT, Server

WALK = "cd /config/project && npm ci && npm test"  # the README's line


def test_the_readme_shows_this_walkthrough() -> None:
    assert f"bash -lc '{WALK}'" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(
    ("example", "expected_exit"), [("node-pass", 0), ("node-fail", 1), ("node-deps", 0)]
)
def test_walkthrough(server: Server, example: str, expected_exit: int) -> None:
    created = server.cli("new", "--type", "small", "--ttl", "3600", check=True)
    name = created.stdout.strip()
    assert json.loads(server.cli_config.read_text())["current"] == name
    try:
        server.cli(
            "push",
            "current",
            str(ROOT / "examples" / example),
            "--to",
            "/config/project",
            check=True,
        )
        if example == "node-deps":
            # What the README warns of: the tests' own program comes with `npm ci`.
            bare = server.cli(
                "exec", "current", "--", "bash", "-lc", "cd /config/project && npm test"
            )
            assert bare.returncode == 127 and "check-math: not found" in bare.stderr, bare.stderr
        ran = server.cli("exec", "current", "--", "bash", "-lc", WALK)
        assert ran.returncode == expected_exit, ran.stderr
        assert ("# pass 1" if expected_exit == 0 else "# fail 1") in ran.stdout
        stopped = server.cli("stop", "current", check=True)
        assert "stopped" in stopped.stderr
        shown = json.loads(server.cli("show", "current", "--json", check=True).stdout)
        assert shown["state"] == "stopped" and shown["snapshots"] == 1
        server.cli("resume", "current", check=True)
        again = server.cli("exec", "current", "--", "cat", "/config/project/math.js", check=True)
        assert "exports.add" in again.stdout
    finally:
        server.cli("rm", "--force", name)
