"""The Paddock skill teaches agents commands: every one it shows must parse, with the
flags it shows, as the CLI really has them."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from paddock.cli.main import parser

from ..skilltext import SKILL, commands


def test_install_puts_it_where_each_agent_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paddock.cli.main import main

    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["skill", "install", "--agent", "claude", "--agent", "pi"]) == 0
    installed = tmp_path / ".claude" / "skills" / "paddock" / "SKILL.md"
    assert installed.read_text() == SKILL.read_text()
    assert (tmp_path / ".pi" / "agent" / "skills" / "paddock" / "SKILL.md").exists()
    assert not (tmp_path / ".codex").exists()


def test_front_matter() -> None:
    text = SKILL.read_text()
    assert text.startswith("---\nname: paddock\ndescription: ")
    assert text.index("\n---\n") < 800


@pytest.mark.parametrize("line", commands())
def test_every_command_parses(line: str) -> None:
    argv = shlex.split(line)[1:]
    command = next(a for a in argv if not a.startswith("-"))
    try:
        args = parser(command).parse_args(argv)
    except SystemExit as exc:  # argparse's way of saying "no such command or flag"
        raise AssertionError(f"the skill shows a command the CLI rejects: {line}") from exc
    assert getattr(args, "run", None) is not None, line


def test_the_skill_covers_the_basics() -> None:
    shown = {shlex.split(line)[1] for line in commands()}
    assert {"new", "push", "exec", "screenshot", "pull", "stop", "rm"} <= shown


def test_no_section_is_there_twice() -> None:
    headings = [line for line in SKILL.read_text().splitlines() if line.startswith("## ")]
    assert len(headings) == len(set(headings)), headings


def test_paddock_box_pins_current_for_one_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the skill tells agents: PADDOCK_BOX wins over the machine-wide `current`.
    from paddock._client import current_box
    from paddock._config import ClientConfig

    monkeypatch.setenv("PADDOCK_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.delenv("PADDOCK_BOX", raising=False)
    cfg = ClientConfig.load(apply_env=False)
    cfg.current = "made-last"
    cfg.save()
    assert current_box() == "made-last"
    monkeypatch.setenv("PADDOCK_BOX", "mine")
    assert current_box() == "mine"
