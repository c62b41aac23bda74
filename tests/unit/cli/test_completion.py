"""`paddock completion SHELL`: scripts generated from the parser complete commands,
subcommands, options and box names."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from paddock.cli.main import main

from ...cli_commands import tree


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(bash: str, line: str) -> list[str]:
    """What bash offers for TAB at the end of `line` (box names from a stand-in paddock)."""
    words = line.split(" ")
    program = (
        bash
        + "\npaddock() { [ \"$*\" = 'ls -q' ] && echo web-1 api-2; }\n"
        + f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        + '_paddock; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return sorted(done.stdout.split())


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("paddock snap", ["snapshot", "snapshots"]),
        ("paddock snapshots ", ["ls", "rm"]),
        ("paddock snapshots rm ", ["api-2", "current", "web-1"]),
        ("paddock --url x network log w", ["web-1"]),
        ("paddock exec --w", ["--wait", "--wake", "--workdir"]),
        ("paddock completion ", []),
        ("paddock ls -", ["--help", "--json", "--mine", "--quiet", "-h", "-q"]),
    ],
)
def test_bash_completes_from_the_parser(
    line: str, offered: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert complete(script("bash", capsys), line) == offered


def test_bash_script_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run(["bash", "-n"], input=script("bash", capsys), text=True, check=True)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_every_command(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = script(shell, capsys)
    for path, _ in tree():
        if path:
            assert path[-1] in text, f"{shell}: nothing completes `{' '.join(path)}`"
    if shutil.which(shell):  # a syntax check where the shell is installed
        subprocess.run([shell, "-n"], input=text, text=True, check=True)
