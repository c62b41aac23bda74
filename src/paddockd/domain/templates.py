"""Templates: a box's disk as a starting point for new boxes, built from a Dockerfile in a
build box or taken from a prepared box, with what a box made from it gets beside its files
(environment, default user and folder, a command it starts at each boot, defaults for
`new`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .accounts import User
from .errors import InvalidRequest

TemplateStatus = Literal["building", "ready", "failed"]
BOX_IMAGE = "paddock-box"  # `base` of a template built on the box image itself
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$|^[a-z]$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_ENV = 64


@dataclass(frozen=True)
class Defaults:
    """What `paddock new --template T` takes unless told otherwise."""

    type: str | None = None
    ttl: int | None = None
    network: str | None = None  # allow-all | deny-all | allowlist
    allow: tuple[str, ...] = ()
    drives: tuple[str, ...] = ()
    idle_stop: int | None = None

    def to_json(self) -> str:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
        return json.dumps({k: v for k, v in data.items() if v not in (None, [])})

    @classmethod
    def from_json(cls, text: str | None) -> Defaults:
        data: dict[str, Any] = json.loads(text or "{}")
        for key in ("allow", "drives"):
            data[key] = tuple(data.get(key) or ())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    owner_id: str | None  # None: the owner's (shared by owner accounts, as keys are)
    status: TemplateStatus
    base: str  # BOX_IMAGE, or the id of the template it was built on
    created_at: float
    shared: bool = False
    message: str | None = None
    image: str | None = None  # the image its disk is made over
    disk: str | None = None  # its saved disk
    built_on: str | None = None  # the box image's id when it was built
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    workdir: str | None = None
    start_cmd: str | None = None
    defaults: Defaults = field(default_factory=Defaults)
    dockerfile: str | None = None  # None: taken from a box's files
    build_args: tuple[tuple[str, str], ...] = ()
    size: int = 0
    built_at: float | None = None

    @property
    def ready(self) -> bool:
        return self.status == "ready" and self.disk is not None


class Templates(Protocol):
    """Templates as the box services and the warm pool ask for them (services/templates.py)."""

    async def for_box(self, name: str, caller: User | None) -> Template: ...


def validate_template_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise InvalidRequest(
            f"invalid template name {name!r}: 1-40 lowercase letters, digits and hyphens, "
            "starting with a letter"
        )
    return name


def parse_env(pairs: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """NAME=value words (`--env`)."""
    if len(pairs) > MAX_ENV:
        raise InvalidRequest(f"at most {MAX_ENV} environment variables")
    found = []
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not _ENV_NAME.match(name) or "\x00" in value:
            raise InvalidRequest(f"invalid environment variable {pair!r}: use NAME=value")
        found.append((name, value))
    return tuple(found)
