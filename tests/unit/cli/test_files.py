"""`paddock cp`: which side is the box, and the command lines it refuses before sending."""

from __future__ import annotations

import re

import pytest

from paddock.cli._common import UsageError
from paddock.cli.files import box_side
from paddock.cli.main import parser


@pytest.mark.parametrize(
    ("arg", "side"),
    [
        ("current:/config/project", ("current", "/config/project")),
        ("web:dist", ("web", "dist")),
        ("web:", ("web", ".")),  # the box user's home
        ("./a:b", None),  # a local name with a colon, as docker cp spells it
        ("/tmp/a:b", None),
        ("dist", None),
    ],
)
def test_box_side(arg: str, side: tuple[str, str] | None) -> None:
    assert box_side(arg) == side


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cp", "a"], "give SRC and DEST"),
        (["cp", "a", "b"], "name the box side as BOX:PATH"),
        (["cp", "x:a", "y:b"], "one side of cp is local"),
        (["cp", "x:a", "y", "z"], "name the box side"),
        (["cp", "-f", "a", "x:b"], "--force is for copies out of a box"),
        (["cp", "--owner", "0:0", "x:a", "b"], "--owner and --wake are for copies into"),
        (["push", "--owner", "root", "x", "a", "--to", "b"], "--owner takes UID:GID"),
    ],
)
def test_usage_errors_before_sending(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PADDOCK_URL", "http://127.0.0.1:9")  # nothing listens: nothing is sent
    monkeypatch.setenv("PADDOCK_TOKEN", "t")
    args = parser(argv[0]).parse_args(argv)
    with pytest.raises(UsageError, match=re.escape(message)):  # exit 2, as argparse's own
        args.run(args)
