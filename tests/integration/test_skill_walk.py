"""The skill's main flow walked against a live server with exactly the commands it shows
(its first sh block, with a name of the test's own for the box): what an agent given only
SKILL.md does first must work as written."""

from __future__ import annotations

import contextlib
import json
import shlex
import uuid
from pathlib import Path

from ..skilltext import blocks, commands
from .conftest import Server

SKILL_BOX = "task-1"  # the name the skill's examples use
PNG = b"\x89PNG\r\n\x1a\n"

# A project whose `npm ci && npm test` works offline: no dependencies, no audit, and a test
# that builds dist/ (what the flow pulls back).
PROJECT = {
    "package.json": json.dumps(
        {"name": "demo", "version": "1.0.0", "private": True, "scripts": {"test": "node t.js"}}
    ),
    "package-lock.json": json.dumps(
        {
            "name": "demo",
            "version": "1.0.0",
            "lockfileVersion": 3,
            "requires": True,
            "packages": {"": {"name": "demo", "version": "1.0.0"}},
        }
    ),
    ".npmrc": "audit=false\nfund=false\nupdate-notifier=false\n",
    "t.js": 'require("fs").mkdirSync("dist", {recursive: true});\n'
    'require("fs").writeFileSync("dist/index.html", "<h1>built</h1>\\n");\n'
    'console.log("tests passed");\n',
}


def main_flow(name: str) -> list[list[str]]:
    """The first sh block's commands as argv (without `paddock`), the box renamed."""
    return [
        [name if word == SKILL_BOX else word for word in shlex.split(line)[1:]]
        for line in commands(blocks()[0])
    ]


def test_the_skills_main_flow(server: Server, tmp_path: Path) -> None:
    name = f"skill-{uuid.uuid4().hex[:6]}"
    flow = main_flow(name)
    assert [argv[0] for argv in flow] == [
        "new", "push", "exec", "screenshot", "pull", "stop", "resume", "rm",
    ]  # fmt: skip
    project = tmp_path / "project"
    project.mkdir()
    for rel, text in PROJECT.items():
        (project / rel).write_text(text)
    try:
        for argv in flow:
            done = server.cli(*argv, cwd=project, check=True)
            assert "Traceback" not in done.stderr
            check(server, argv[0], name, project, done.stdout)
    finally:
        with server.client() as c, contextlib.suppress(Exception):
            c.delete_box(name, force=True)


def check(server: Server, command: str, name: str, project: Path, out: str) -> None:
    """What each step of the flow promises, checked right after it."""
    with server.client() as c:
        if command == "new":
            assert out.strip() == name  # the name, on stdout, for scripts to keep
        elif command == "push":
            assert c.stat(name, "/config/project/package.json")["uid"] == 1000  # abc's
        elif command == "exec":
            assert "tests passed" in out
        elif command == "screenshot":
            assert (project / "app.png").read_bytes()[:8] == PNG
        elif command == "pull":
            assert (project / "dist" / "index.html").read_text() == "<h1>built</h1>\n"
        elif command == "stop":
            assert c.get_box(name).state == "stopped"
        elif command == "resume":
            assert c.get_box(name).state == "running"
            assert c.stat(name, "/config/project/dist/index.html")["exists"]  # files kept
        elif command == "rm":
            assert name not in {b.name for b in c.list_boxes()}
