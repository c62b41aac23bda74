"""An E2B build request's template as the Dockerfile Paddock's build takes: every value read
back by the Dockerfile parser as sent, and what cannot be built here refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from paddockd.domain.dockerfile import Copy, Run, plan
from paddockd.domain.errors import InvalidRequest
from paddockd.services.e2b.template_steps import translate

HASH = "ab" * 32


def step(kind: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "args": list(args), "force": False, **extra}


def test_steps_read_back_as_sent() -> None:
    spec = {
        "fromImage": "e2bdev/base:latest",
        "steps": [
            step("ENV", "A", 'say "hi" \\ there', "B", "x y"),
            step("WORKDIR", "/opt/my app"),
            step("COPY", "src/*.py", "/opt/my app/", "abc", "0750", filesHash=HASH),
            step("RUN", "echo \"$A\" && exit 0; ['quoted']"),
            step("RUN", "whoami", "abc"),
            step("USER", "abc"),
            step("RUN", "id"),
        ],
        "startCmd": "python3 -m http.server 'a b'",
        "readyCmd": "curl localhost",
    }
    done = translate(spec)
    assert done.files == (HASH,)
    assert any("readyCmd" in n for n in done.notes)
    steps = plan(done.dockerfile)
    assert steps.from_box_image
    assert dict(steps.final.env) == {"A": 'say "hi" \\ there', "B": "x y"}
    assert steps.final.workdir == "/opt/my app" and steps.final.user == "abc"
    runs = [s for s in steps.steps if isinstance(s, Run)]
    assert runs[1].argv == ("/bin/bash", "-c", "echo \"$A\" && exit 0; ['quoted']")
    assert (runs[2].argv[-1], runs[2].state.user) == ("whoami", "abc")
    assert (runs[3].argv[-1], runs[3].state.user) == ("id", "abc")
    [copy] = [s for s in steps.steps if isinstance(s, Copy)]
    assert (copy.sources, copy.dest, copy.owner, copy.mode) == (
        ("src/*.py",),
        "/opt/my app/",
        "abc",
        0o750,
    )
    assert steps.start == "'/bin/bash' '-c' 'python3 -m http.server '\\''a b'\\'''"


def test_a_run_as_another_user_leaves_the_user_as_it_was() -> None:
    done = translate({"steps": [step("USER", "abc"), step("RUN", "id", "root"), step("RUN", "id")]})
    runs = [s for s in plan(done.dockerfile).steps if isinstance(s, Run)]
    assert [r.state.user for r in runs] == ["root", "abc"]


def test_a_template_on_a_template() -> None:
    assert plan(translate({"fromTemplate": "team-base"}).dockerfile).base == "team-base"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"fromImage": "python:3"}, "no image registry"),
        ({"fromImage": "e2bdev/base", "fromImageRegistry": {"type": "registry"}}, "registry"),
        ({"fromTemplate": "../etc"}, "invalid template name"),
        ({"steps": [step("ENV", "A")]}, "needs 2"),
        ({"steps": [step("ENV", "A", "b", "C")]}, "pairs"),
        ({"steps": [step("ENV", "1A", "b")]}, "not a variable name"),
        ({"steps": [step("ENV", "A", "line\nRUN evil")]}, "line break"),
        ({"steps": [step("WORKDIR", "/a\nRUN evil")]}, "line break"),
        ({"steps": [step("USER", "abc\nRUN evil")]}, "not a user"),
        ({"steps": [step("RUN", "id", "x y")]}, "not a user"),
        ({"steps": [step("COPY", "a", "/b")]}, "filesHash"),
        ({"steps": [step("COPY", "a", "/b", "", "99", filesHash=HASH)]}, "octal mode"),
        ({"steps": [step("COPY", "a", "/b", "a b", filesHash=HASH)]}, "not a user"),
        ({"steps": [step("ADD", "a", "/b")]}, "not supported"),
        ({"steps": [{"type": "RUN", "args": [1]}]}, "list of strings"),
    ],
)
def test_what_cannot_be_built_is_refused(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidRequest, match=says):
        translate(spec)
