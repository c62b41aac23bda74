"""docker cp's rules for where a push or pull lands, one case at a time, both sides."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from paddock._placement import (
    Dest,
    Kind,
    Landing,
    Source,
    land,
    local_dest,
    local_source,
    parent_of,
)
from paddock.wire.errors import InvalidRequest, NotFound, PaddockError


def src(path: str, kind: Kind, name: str = "dist") -> Source:
    return Source(path, name, kind, local=False)


def box(path: str, kind: Kind | None, parent: Kind | None = "dir") -> Dest:
    return Dest(path, kind, parent, local=False, where=" in box b")


@pytest.mark.parametrize(
    ("source", "dest", "landing"),
    [
        # SRC a file
        (src("dist", "file"), box("/out", "dir"), Landing("/out/dist")),
        (src("dist", "file"), box("/out/", "dir"), Landing("/out/dist")),
        (src("dist", "file"), box("/out/f", None), Landing("/out/f")),
        (src("dist", "file"), box("/out/f", "file"), Landing("/out/f")),
        # SRC a folder
        (src("dist", "dir"), box("/out/new", None), Landing("/out/new")),
        (src("dist", "dir"), box("/out/new/", None), Landing("/out/new")),
        (src("dist", "dir"), box("/out", "dir"), Landing("/out/dist")),
        (src("dist/", "dir"), box("/out", "dir"), Landing("/out/dist")),  # not rsync's /
        # SRC/. : its contents
        (src("dist/.", "dir"), box("/out", "dir"), Landing("/out", merge=True)),
        (src(".", "dir", "config"), box("/out", "dir"), Landing("/out", merge=True)),
        (src("dist/.", "dir"), box("/out/new", None), Landing("/out/new")),
        # relative and root paths
        (src("dist", "dir"), box("site", None), Landing("site")),
        (src("dist", "file"), box("/", "dir"), Landing("/dist")),
    ],
)
def test_where_it_lands(source: Source, dest: Dest, landing: Landing) -> None:
    assert land(source, dest) == landing


@pytest.mark.parametrize(
    ("source", "dest", "error", "message"),
    [
        (src("dist", "dir"), box("/out/f", "file"), InvalidRequest, "onto the file /out/f"),
        (src("dist", "file"), box("/out/f/", "file"), InvalidRequest, "/out/f/ in box b is not"),
        (src("dist", "file"), box("/out/new/", None), NotFound, "in box b: /out/new/ .DEST ends"),
        (src("dist", "file"), box("/a/b/f", None, None), NotFound, "no such folder in box b: /a/b"),
        (src("dist", "dir"), box("/a/f/new", None, "file"), InvalidRequest, "/a/f in box b is"),
        (src("dist/.", "file"), box("/out", "dir"), InvalidRequest, "only a folder has contents"),
    ],
)
def test_what_is_refused(
    source: Source, dest: Dest, error: type[PaddockError], message: str
) -> None:
    with pytest.raises(error, match=message):
        land(source, dest)


@pytest.mark.parametrize(
    ("path", "parent"),
    [("a", "."), ("a/b", "a"), ("a/b/", "a"), ("/x", "/"), ("/", "/"), ("./f", ".")],
)
def test_parent_of(path: str, parent: str) -> None:
    assert parent_of(path, local=False) == parent


def test_the_local_side_is_looked_up(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "dir", tmp_path / "link")
    assert local_dest(str(tmp_path / "dir")) == Dest(str(tmp_path / "dir"), "dir")
    assert local_dest(str(tmp_path / "file")).kind == "file"
    assert local_dest(str(tmp_path / "link")).kind == "dir"  # a link at DEST is followed
    assert local_dest(str(tmp_path / "new")) == Dest(str(tmp_path / "new"), None, "dir")
    assert local_dest(str(tmp_path / "no" / "new")).parent is None
    assert local_dest(str(tmp_path / "file" / "new")).parent == "file"
    # A link as SRC is copied as a link; `dir/.` is the folder's contents, named as it.
    assert local_source(str(tmp_path / "link")).kind == "file"
    dot = local_source(str(tmp_path / "dir") + "/.")
    assert (dot.kind, dot.name, dot.contents) == ("dir", "dir", True)
    with pytest.raises(NotFound, match="no such file or directory"):
        local_source(str(tmp_path / "nope"))


CASES = json.loads((Path(__file__).parents[2] / "spec" / "placement_cases.json").read_text())
ERRORS: dict[str, type[PaddockError]] = {"InvalidRequest": InvalidRequest, "NotFound": NotFound}


def _src(case: dict[str, str]) -> Source:
    return Source(case["path"], case["name"], case["kind"], local=False)  # type: ignore[arg-type]


def _dest(case: dict[str, str | None]) -> Dest:
    return Dest(case["path"], case["kind"], case["parent"], local=False, where=CASES["where"])  # type: ignore[arg-type]


def test_the_cases_both_sdks_share() -> None:
    """The same table the TypeScript SDK checks: both land every copy alike (the box
    places a push by it too: tests/integration/test_inbox_contract.py)."""
    for case in CASES["lands"]:
        assert land(_src(case["source"]), _dest(case["dest"])) == Landing(**case["landing"])
    for case in CASES["refused"]:
        with pytest.raises(ERRORS[case["error"]]) as err:
            land(_src(case["source"]), _dest(case["dest"]))
        assert case["message"] in str(err.value)
    for path, parent in CASES["parents"]:
        assert parent_of(path, local=False) == parent
