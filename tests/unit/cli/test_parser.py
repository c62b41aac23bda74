"""The help of `paddock`: every command and subcommand explains itself in a line and has
help of its own, texts fit the terminal, lists agree with the server and the docs, and
every example parses."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from paddock.cli._common import AGENTS, PROVIDERS
from paddock.cli.main import main, parse, parser
from paddockd.domain.agents import AGENTS as SERVER_AGENTS
from paddockd.domain.credentials import PROVIDERS as SERVER_PROVIDERS

from ...cli_commands import examples, paddock_argv, summaries, tree

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


@pytest.mark.parametrize(
    ("path", "p"), list(tree()), ids=[" ".join(p) or "paddock" for p, _ in tree()]
)
def test_every_command_has_a_summary_and_a_description(
    path: tuple[str, ...], p: argparse.ArgumentParser
) -> None:
    assert p.description, f"`paddock {' '.join(path)} --help` says nothing"
    for name, summary in summaries(p).items():
        assert summary and "\n" not in summary, f"{' '.join(path)} {name}: no one-line help"
        assert len(summary) <= 75, f"{' '.join(path)} {name}: its summary does not fit a line"


@pytest.mark.parametrize("path", [p for p, _ in tree() if p], ids=" ".join)
def test_each_command_prints_its_own_help(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: paddock {' '.join(path)} ")
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, f"not wrapped to the terminal: {long}"


def test_help_command_is_dash_dash_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["help", "snapshots", "rm"]) == 0
    via_help = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["snapshots", "rm", "--help"])
    assert capsys.readouterr().out == via_help


@pytest.mark.parametrize(
    ("argv", "run", "fields"),
    [
        (["snapshots", "b"], "cmd_snapshots", {"box": "b"}),
        (["snapshots", "--json", "b"], "cmd_snapshots", {"box": "b", "json": True}),
        (["snapshots", "rm", "b", "v1"], "cmd_snapshots_rm", {"box": "b", "snap": "v1"}),
        (["network", "b"], "cmd_policy", {"box": "b", "mode": None}),
        (["network", "--json", "b"], "cmd_policy", {"box": "b", "json": True}),
        (["network", "b", "allow", "x.org"], "cmd_policy", {"mode": "allow", "targets": ["x.org"]}),
        (["network", "log", "b", "--limit", "3"], "cmd_log", {"box": "b", "limit": 3}),
        (["runs", "b"], "cmd_runs", {"box": "b"}),
        (["runs", "follow", "r1"], "cmd_follow", {"run_id": "r1", "live": True}),
        (["rm", "-f", "a", "b"], "cmd_rm", {"boxes": ["a", "b"], "force": True}),
        (["ls", "-q"], "cmd_ls", {"quiet": True}),
    ],
)
def test_the_spellings_users_type(argv: list[str], run: str, fields: dict[str, object]) -> None:
    args = parse(argv)
    assert args.run.__name__ == run
    assert {k: getattr(args, k) for k in fields} == fields


def test_provider_and_agent_lists_are_the_servers() -> None:
    assert set(PROVIDERS) == set(SERVER_PROVIDERS)
    assert set(AGENTS) == set(SERVER_AGENTS)


def _help(*path: str) -> str:
    p = parser(path[0])
    for word in path:
        p = p.subcommands()[word]  # type: ignore[attr-defined]
    return " ".join(p.format_help().split())


@pytest.mark.parametrize(
    ("names", "help_of", "doc_heading"),
    [
        (PROVIDERS, ("auth",), "### `paddock auth set"),
        (PROVIDERS, ("auth", "set"), "### `paddock auth set"),
        (AGENTS, ("agents",), "### `paddock agents"),
        (AGENTS, ("prompt",), "### `paddock prompt"),
    ],
)
def test_help_and_docs_name_the_same(
    names: tuple[str, ...], help_of: tuple[str, ...], doc_heading: str
) -> None:
    text = _help(*help_of)
    section = DOCS.read_text().split(doc_heading, 1)[1].split("\n### ", 1)[0]
    for name in names:
        assert re.search(rf"\b{name}\b", text), f"`paddock {' '.join(help_of)} --help`: {name}"
        assert re.search(rf"\b{name}\b", section), f"docs/cli.md {doc_heading}: {name}"


@pytest.mark.parametrize(("command", "line"), examples(), ids=[line for _, line in examples()])
def test_every_example_parses(command: str, line: str) -> None:
    shown = paddock_argv(line)
    assert shown, f"{line}: no paddock command in it"
    for argv in shown:
        try:
            args = parse(argv)
        except SystemExit as exc:
            raise AssertionError(
                f"`paddock {command} --help` shows a line it rejects: {line}"
            ) from exc
        assert getattr(args, "run", None) is not None, line
