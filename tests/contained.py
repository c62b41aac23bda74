"""Checks for pull tests: what lies beside a destination does not change, and no link left
under the destination leads out of it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

Snapshot = dict[str, tuple[int, bytes]]


def snapshot(root: Path, skip: str) -> Snapshot:
    """Every path under `root` with its mode and, for files, bytes; names under `root`
    starting with `skip` (the destinations) are left out."""
    seen = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0].startswith(skip):
            continue
        st = path.lstat()
        seen[str(rel)] = (st.st_mode, path.read_bytes() if stat.S_ISREG(st.st_mode) else b"")
    return seen


def assert_contained(dest: Path) -> None:
    """No symlink under `dest` resolves outside it."""
    top = dest.resolve()
    for path in dest.rglob("*"):
        if path.is_symlink():
            resolved = Path(os.path.realpath(path))
            assert resolved == top or top in resolved.parents, f"{path} -> {resolved}"
