"""A template's Dockerfile as a plan of steps run in a build box: parsed by the `dockerfile`
library (Docker's own parser), then checked against what a box build does. A template is
files on a box's disk: `RUN` runs in a box like any command, `COPY` copies from the
build's context, `ENV`, `ARG`, `WORKDIR` and `USER` shape the steps after them and the
boxes made from the template, `CMD` becomes the command each such box starts at boot.
Anything else that would change a box (another base, a second stage, `ENTRYPOINT`,
`SHELL`, cache mounts, URLs) is refused with its line named; what says nothing about a
box's files (`EXPOSE`, `LABEL`, `HEALTHCHECK`, `STOPSIGNAL`) is noted and skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import dockerfile

from .errors import InvalidRequest

BOX_IMAGES = ("paddock-box", "paddock-box:latest", "scratch-paddock")
MAX_DOCKERFILE = 256 * 1024
MAX_STEPS = 200
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_CHOWN = re.compile(r"^[A-Za-z0-9_.-]{1,32}(:[A-Za-z0-9_.-]{1,32})?$")
_SKIPPED = frozenset({"EXPOSE", "LABEL", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"})


@dataclass(frozen=True)
class State:
    """What a step runs with, and what a box made from the template gets."""

    env: tuple[tuple[str, str], ...] = ()
    workdir: str = "/"
    user: str = "root"

    def with_env(self, **values: str) -> State:
        merged = dict(self.env)
        merged.update(values)
        return replace(self, env=tuple(merged.items()))


@dataclass(frozen=True)
class Run:
    line: int
    text: str  # the instruction as written (for the log)
    state: State
    shell: str | None = None  # RUN command (shell form, run by /bin/sh -c)
    argv: tuple[str, ...] = ()  # RUN ["prog", "arg"] (exec form)


@dataclass(frozen=True)
class Copy:
    line: int
    text: str
    state: State
    sources: tuple[str, ...]  # paths in the context
    dest: str  # absolute, in the box
    owner: str | None = None  # --chown (default: root)
    mode: int | None = None  # --chmod


Step = Run | Copy


@dataclass(frozen=True)
class Plan:
    base: str  # the box image, or the name of a template it builds on
    steps: tuple[Step, ...]
    final: State
    start: str | None = None  # CMD, as a shell command line
    notes: tuple[str, ...] = field(default_factory=tuple)  # instructions skipped
    user_set: bool = False  # whether a USER (WORKDIR) names the boxes' default
    workdir_set: bool = False

    @property
    def from_box_image(self) -> bool:
        return self.base in BOX_IMAGES


def _refuse(cmd: dockerfile.Command, why: str) -> InvalidRequest:
    return InvalidRequest(f"Dockerfile line {cmd.start_line}: {cmd.cmd} {why}")


def expand(word: str, values: dict[str, str]) -> str:
    """A word as Docker reads one (ENV, WORKDIR, USER, COPY): quotes removed, `$NAME`,
    `${NAME}`, `${NAME:-default}` and `${NAME:+alt}` replaced; single quotes keep `$`."""
    out: list[str] = []
    i, quote = 0, ""
    while i < len(word):
        c = word[i]
        if c == "\\" and i + 1 < len(word) and quote != "'":
            out.append(word[i + 1])
            i += 2
            continue
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
            i += 1
            continue
        if c == "$" and quote != "'":
            found = _VAR.match(word, i)
            if found:
                name = found.group(1) or found.group(4)
                value = values.get(name, "")
                if found.group(2) == "-" and not value:
                    value = expand(found.group(3), values)
                elif found.group(2) == "+":
                    value = expand(found.group(3), values) if value else ""
                out.append(value)
                i = found.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _pairs(cmd: dockerfile.Command, values: dict[str, str]) -> dict[str, str]:
    """ENV/ARG's key/value pairs (`K=V K2=V2`, or the old `K V...`)."""
    parts = list(cmd.value)
    if cmd.cmd == "ARG":
        found = {}
        for part in parts:
            name, eq, default = part.partition("=")
            found[name] = expand(default, values) if eq else values.get(name, "")
        return found
    if len(parts) % 2:
        raise _refuse(cmd, "needs NAME=value pairs")
    return {parts[i]: expand(parts[i + 1], values) for i in range(0, len(parts), 2)}


def _absolute(path: str, state: State) -> str:
    if not path:
        raise InvalidRequest("an empty path in the Dockerfile")
    joined = path if path.startswith("/") else f"{state.workdir.rstrip('/')}/{path}"
    return re.sub(r"/+", "/", joined)


def plan(
    text: str, build_args: dict[str, str] | None = None, base_env: dict[str, str] | None = None
) -> Plan:
    """The build's steps, or InvalidRequest naming the first line it cannot take.
    `base_env`: the environment of what it builds on (`ENV PATH=/opt/x:$PATH`)."""
    if len(text.encode()) > MAX_DOCKERFILE:
        raise InvalidRequest(f"the Dockerfile is over {MAX_DOCKERFILE // 1024} KiB")
    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        raise InvalidRequest(f"the Dockerfile does not parse: {exc}") from None
    given = dict(build_args or {})
    args: dict[str, str] = {}  # ARG values in scope
    state = State(env=(), workdir="/", user="root")
    base: str | None = None
    steps: list[Step] = []
    start: str | None = None
    notes: list[str] = []
    for cmd in commands:
        values = {**(base_env or {}), **args, **dict(state.env)}
        if cmd.heredocs:
            raise _refuse(cmd, "with a heredoc is not supported: put the script in the context")
        if cmd.cmd == "ARG" and base is None:
            args.update({k: given.get(k, v) for k, v in _pairs(cmd, values).items()})
            continue
        if cmd.cmd == "FROM":
            if base is not None:
                raise _refuse(cmd, "again: a template has one stage")
            if cmd.flags or len(cmd.value) != 1:
                raise _refuse(cmd, "takes only an image or template name")
            base = expand(cmd.value[0], args)
            continue
        if base is None:
            raise _refuse(cmd, "before FROM")
        if cmd.cmd == "ARG":
            found = _pairs(cmd, values)
            args.update({k: given.get(k, v) for k, v in found.items()})
        elif cmd.cmd == "ENV":
            state = state.with_env(**_pairs(cmd, values))
        elif cmd.cmd == "WORKDIR":
            state = replace(state, workdir=_absolute(expand(cmd.value[0], values), state))
            # As Docker makes it: by root whoever USER is, from a folder that exists.
            made_by_root = replace(state, user="root", workdir="/")
            mkdir = ("mkdir", "-p", state.workdir)
            steps.append(Run(cmd.start_line, cmd.original, made_by_root, argv=mkdir))
        elif cmd.cmd == "USER":
            user = expand(cmd.value[0], values)
            if not _CHOWN.match(user):
                raise _refuse(cmd, f"{user!r} is not a user name or id")
            state = replace(state, user=user)
        elif cmd.cmd == "RUN":
            if cmd.flags:
                raise _refuse(cmd, f"{cmd.flags[0]}: RUN takes no options here")
            # ARGs are in RUN's environment, under ENV's of the same name.
            run_state = state.with_env(**{**args, **dict(state.env)})
            if cmd.json:
                steps.append(Run(cmd.start_line, cmd.original, run_state, argv=tuple(cmd.value)))
            else:
                steps.append(Run(cmd.start_line, cmd.original, run_state, shell=cmd.value[0]))
        elif cmd.cmd in ("COPY", "ADD"):
            steps.append(_copy(cmd, state, values))
        elif cmd.cmd == "CMD":
            start = " ".join(_quoted(v) for v in cmd.value) if cmd.json else cmd.value[0]
        elif cmd.cmd in _SKIPPED:
            notes.append(f"line {cmd.start_line}: {cmd.cmd} says nothing of a box's files; skipped")
        else:
            raise _refuse(cmd, "is not supported in a template (a box has its own init)")
        if len(steps) > MAX_STEPS:
            raise InvalidRequest(f"a template has at most {MAX_STEPS} steps")
    if base is None:
        raise InvalidRequest("the Dockerfile has no FROM (FROM paddock-box, or a template)")
    said = {c.cmd for c in commands}
    return Plan(base, tuple(steps), state, start, tuple(notes), "USER" in said, "WORKDIR" in said)


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _copy(cmd: dockerfile.Command, state: State, values: dict[str, str]) -> Copy:
    owner: str | None = None
    mode: int | None = None
    for flag in cmd.flags:
        name, _, value = flag.partition("=")
        if name == "--chown" and _CHOWN.match(expand(value, values)):
            owner = expand(value, values)
        elif name == "--chmod" and re.fullmatch(r"[0-7]{3,4}", value):
            mode = int(value, 8)
        else:
            raise _refuse(cmd, f"{flag}: only --chown=USER[:GROUP] and --chmod=MODE are taken")
    words = [expand(v, values) for v in cmd.value]
    if len(words) < 2:
        raise _refuse(cmd, "needs a source and a destination")
    *sources, dest = words
    for source in sources:
        if "://" in source:
            raise _refuse(cmd, "from a URL: fetch it with RUN curl (under the build's policy)")
        if source.startswith("/") or ".." in source.split("/"):
            raise _refuse(cmd, f"{source!r}: sources are paths inside the build's context")
    absolute = _absolute(dest, state)
    if dest.endswith("/") and not absolute.endswith("/"):
        absolute += "/"
    return Copy(cmd.start_line, cmd.original, state, tuple(sources), absolute, owner, mode)
