"""Where a copy lands: docker cp's rules, the same for push (into a box) and pull (out of
it). `RULES` is their summary, as `paddock push/pull/cp --help` shows it. Only paths are
decided here; what is on each side is looked up by the caller (a stat in the box, the
local file system here).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

from .wire.errors import InvalidRequest, NotFound, PaddockError

Kind = Literal["file", "dir"]  # what is at a path; None where nothing is

RULES = """\
Where SRC lands (docker cp's rules, the same both ways):
  SRC a file     DEST an existing folder: into it, as DEST/<name>
                 DEST an existing file: replaced (pull: only with --force)
                 DEST missing: that name (its folder must exist;
                 a DEST ending in / must be an existing folder)
  SRC a folder   DEST missing: created, with SRC's contents
                 DEST an existing folder: into it, as DEST/<name>
                 DEST an existing file: refused
  SRC/.          SRC's contents: into DEST if it is a folder, else as a new folder DEST
A trailing / on SRC changes nothing (unlike rsync). A link at DEST is followed."""


@dataclass(frozen=True)
class Source:
    """SRC: `path` as written, the `name` it goes in under when copied whole, its `kind`."""

    path: str
    name: str
    kind: Kind
    local: bool = True

    @property
    def contents(self) -> bool:
        """`SRC/.` (and `.` itself) means what is in SRC, not SRC."""
        return _is_contents(self.path, _flavor(self.local))


@dataclass(frozen=True)
class Dest:
    """DEST: `path` as written (a trailing / says "a folder"), what is there now (`kind`,
    links followed) and, when nothing is, what its `parent` is. `where` ends messages
    about the box side (" in box NAME")."""

    path: str
    kind: Kind | None
    parent: Kind | None = "dir"
    local: bool = True
    where: str = ""


@dataclass(frozen=True)
class Landing:
    """Where SRC goes: `path` is what SRC becomes, or with `merge` the existing folder that
    SRC's contents go into."""

    path: str
    merge: bool = False


def check_source(src: Source) -> Source:
    """SRC itself, or why it cannot be copied whatever DEST is."""
    if src.contents and src.kind != "dir":
        raise InvalidRequest(f"{src.path} is not a folder: only a folder has contents to copy")
    return src


def land(src: Source, dest: Dest) -> Landing:
    """The landing of one SRC at DEST, or the error that explains why there is none."""
    paths = _flavor(dest.local)
    shown = f"{dest.path}{dest.where}"
    check_source(src)
    if dest.kind == "dir":
        if src.contents:
            return Landing(dest.path, merge=True)
        return Landing(str(paths.join(dest.path, src.name)))
    wants_folder = _ends_in_sep(dest.path, paths)
    if dest.kind == "file":
        if src.kind == "dir":
            raise InvalidRequest(f"cannot copy the folder {src.path} onto the file {shown}")
        if wants_folder:
            raise InvalidRequest(f"{shown} is not a folder")
        return Landing(dest.path)
    if wants_folder and src.kind == "file":
        raise NotFound(f"no such folder{dest.where}: {dest.path} (DEST ends in /)")
    _check_parent(dest)
    return Landing(_strip(dest.path, paths))


def parent_of(path: str, *, local: bool) -> str:
    """The folder that holds `path` ("." for a bare name)."""
    paths = _flavor(local)
    return str(paths.dirname(_strip(path, paths))) or "."


def _check_parent(dest: Dest) -> None:
    parent = parent_of(dest.path, local=dest.local)
    if dest.parent is None:
        raise NotFound(f"no such folder{dest.where}: {parent}")
    if dest.parent != "dir":
        raise InvalidRequest(f"{parent}{dest.where} is not a folder")


# -- the local side -------------------------------------------------------------------


def local_source(path: str) -> Source:
    """A local SRC. A link is copied as a link (it is a "file" here)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise NotFound(f"no such file or directory: {path}") from None
    except NotADirectoryError:  # `file/.`, `file/x`
        raise InvalidRequest(f"{path}: {parent_of(path, local=True)} is not a folder") from None
    except OSError as exc:
        raise PaddockError(f"cannot read {path}: {exc.strerror or exc}") from None
    kind: Kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
    return Source(path, os.path.basename(os.path.abspath(path)) or "root", kind)


def local_dest(path: str) -> Dest:
    """A local DEST, looked up (links followed)."""
    kind = local_kind(path)
    parent = "dir" if kind is not None else local_kind(parent_of(path, local=True))
    return Dest(path, kind, parent)


def local_kind(path: str) -> Kind | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PaddockError(f"cannot look at {path}: {exc.strerror or exc}") from None
    return "dir" if stat.S_ISDIR(st.st_mode) else "file"


# -- paths ----------------------------------------------------------------------------


def _flavor(local: bool) -> ModuleType:
    """os.path here (Windows separators on Windows), posixpath in a box."""
    return os.path if local else posixpath


def _seps(paths: ModuleType) -> tuple[str, ...]:
    return tuple(s for s in (paths.sep, paths.altsep) if s)


def _ends_in_sep(path: str, paths: ModuleType) -> bool:
    return path.endswith(_seps(paths))


def _is_contents(path: str, paths: ModuleType) -> bool:
    return path == "." or path.endswith(tuple(s + "." for s in _seps(paths)))


def _strip(path: str, paths: ModuleType) -> str:
    """`path` without trailing separators (a root, `/` or `C:\\`, stays itself)."""
    drive, rest = paths.splitdrive(path)
    return str(drive) + str(rest.rstrip("".join(_seps(paths))) or rest[:1])
