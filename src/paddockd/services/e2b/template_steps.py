"""An E2B template (the SDK's `Template()` builder, as its build request sends it: a base
and steps RUN, COPY, ENV, WORKDIR, USER, a start command) as a Dockerfile that Paddock's
template build takes (domain/dockerfile.py), so both are checked and built by one path.

Every word is written so the Dockerfile reads it back as sent: RUN and CMD in the JSON
form, COPY's paths in JSON, ENV and WORKDIR quoted. A value that cannot be carried (a line
break in a name or path, a registry to pull from) is refused, never rewritten."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...domain.errors import InvalidRequest
from ...domain.templates import validate_template_name

# E2B's own base images: a template on any of them builds on Paddock's box image (no
# registry is reachable here, and the box image is Paddock's base).
E2B_BASES = frozenset({"e2bdev/base", "e2bdev/code-interpreter", "paddock-box"})
FILES_HASH = re.compile(r"^[0-9a-f]{64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_USER = re.compile(r"^[A-Za-z0-9_.-]{1,32}(:[A-Za-z0-9_.-]{1,32})?$")
_MODE = re.compile(r"^[0-7]{3,4}$")
_TAG = re.compile(r"(:[\w.-]+)?(@.*)?$")  # an image's :tag and @digest


@dataclass(frozen=True)
class Translated:
    dockerfile: str
    files: tuple[str, ...]  # the COPY steps' files hashes, in order
    notes: tuple[str, ...]  # what was asked that Paddock does not do (for the build log)


def _quoted(word: str, what: str) -> str:
    if "\n" in word or "\r" in word:
        raise InvalidRequest(f"{what} {word!r}: a line break cannot be part of it")
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _base(spec: Mapping[str, Any]) -> str:
    if spec.get("fromImageRegistry"):
        raise InvalidRequest("a template here cannot pull from a registry (none is reachable)")
    template = spec.get("fromTemplate")
    if template:
        name = str(template).split(":", 1)[0]
        return validate_template_name(name)
    image = str(spec.get("fromImage") or "e2bdev/base")
    bare = _TAG.sub("", image)
    if bare not in E2B_BASES:
        raise InvalidRequest(
            f"fromImage {image!r}: no image registry is reachable from Paddock; build on "
            "the base image (Template().from_base_image()) or on a template of yours "
            "(from_template), and install what you need with run_cmd"
        )
    return "paddock-box"


def _args(step: Mapping[str, Any], least: int) -> list[str]:
    args = step.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise InvalidRequest(f"a {step.get('type')} step's args are a list of strings")
    if len(args) < least:
        raise InvalidRequest(f"a {step.get('type')} step needs {least} argument(s)")
    return args


def translate(spec: Mapping[str, Any]) -> Translated:
    """The build request's template as a Dockerfile, or InvalidRequest naming what is not
    possible here."""
    steps: Sequence[Mapping[str, Any]] = spec.get("steps") or []
    if not isinstance(steps, list):
        raise InvalidRequest("steps is a list")
    lines = [f"FROM {_base(spec)}"]
    files: list[str] = []
    notes: list[str] = []
    user = "root"
    for step in steps:
        kind = step.get("type") if isinstance(step, Mapping) else None
        if kind == "RUN":
            command, *rest = _args(step, 1)
            as_user = rest[0] if rest and rest[0] else None
            if as_user and not _USER.match(as_user):
                raise InvalidRequest(f"RUN as {as_user!r}: not a user name or id")
            if as_user:
                lines.append(f"USER {as_user}")
            lines.append("RUN " + json.dumps(["/bin/bash", "-c", command]))
            if as_user:
                lines.append(f"USER {user}")
        elif kind == "COPY":
            src, dest, *rest = _args(step, 2)
            owner, mode = [*rest, "", ""][:2]
            files_hash = str(step.get("filesHash") or "")
            if not FILES_HASH.match(files_hash):
                raise InvalidRequest(f"COPY {src}: its filesHash is missing or malformed")
            flags = ""
            if owner:
                if not _USER.match(owner):
                    raise InvalidRequest(f"COPY --chown {owner!r}: not a user name or id")
                flags += f"--chown={owner} "
            if mode:
                if not _MODE.match(mode):
                    raise InvalidRequest(f"COPY mode {mode!r}: an octal mode such as 0755")
                flags += f"--chmod={mode} "
            lines.append(f"COPY {flags}" + json.dumps([src, dest]))
            files.append(files_hash)
        elif kind == "ENV":
            args = _args(step, 2)
            if len(args) % 2:
                raise InvalidRequest("an ENV step's args are name, value pairs")
            pairs = []
            for name, value in zip(args[::2], args[1::2], strict=True):
                if not _ENV_NAME.match(name):
                    raise InvalidRequest(f"ENV {name!r}: not a variable name")
                pairs.append(f"{name}={_quoted(value, f'ENV {name}')}")
            lines.append("ENV " + " ".join(pairs))
        elif kind == "WORKDIR":
            lines.append("WORKDIR " + _quoted(_args(step, 1)[0], "WORKDIR"))
        elif kind == "USER":
            user = _args(step, 1)[0]
            if not _USER.match(user):
                raise InvalidRequest(f"USER {user!r}: not a user name or id")
            lines.append(f"USER {user}")
        else:
            raise InvalidRequest(f"a template step of type {kind!r} is not supported")
    if start := spec.get("startCmd"):
        lines.append("CMD " + json.dumps(["/bin/bash", "-c", str(start)]))
    if spec.get("readyCmd"):
        notes.append("readyCmd: Paddock does not wait for it; the start command runs at each boot")
    return Translated("\n".join(lines) + "\n", tuple(files), tuple(notes))
