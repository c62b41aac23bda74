"""A box, its lifecycle states and the transitions between them."""

from __future__ import annotations

import enum
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidRequest, InvalidState
from .network import NetworkPolicy

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$|^[a-z]$")
RESERVED_NAMES = frozenset({"current", "all", "new"})
# A reference is a box's id, its name, or a prefix of its id this long or longer. A name
# that could also be read as an id or a prefix would shadow another box, so none may be
# made of hex digits alone (ids are; see new_box_id).
MIN_ID_PREFIX = 3
_ID_LIKE = re.compile(rf"^[0-9a-f]{{{MIN_ID_PREFIX},}}$")
MAX_TTL = 30 * 24 * 3600


class BoxState(str, enum.Enum):
    CREATING = "creating"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    DELETING = "deleting"
    ERROR = "error"


class Desired(str, enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"
    DELETED = "deleted"


class TtlAction(str, enum.Enum):
    STOP = "stop"
    DELETE = "delete"


# What a user may ask for, from each observed state. The reconciler does the work.
_ALLOWED: dict[Desired, frozenset[BoxState]] = {
    Desired.STOPPED: frozenset(
        {BoxState.RUNNING, BoxState.STARTING, BoxState.CREATING, BoxState.ERROR}
    ),
    Desired.RUNNING: frozenset({BoxState.STOPPED, BoxState.ERROR}),
    Desired.DELETED: frozenset(BoxState) - {BoxState.DELETING},
}


@dataclass(frozen=True)
class BoxType:
    name: str
    cpus: float
    memory_mb: int
    pids: int
    description: str = ""
    disk_mb: int = 0  # root filesystem size where the engine can enforce it; 0: none


@dataclass(frozen=True)
class Box:
    id: str
    name: str
    type: str
    image: str
    state: BoxState
    desired: Desired
    created_at: datetime
    ttl: int
    ttl_action: TtlAction
    cpus: float
    memory_mb: int
    pids: int
    started_at: datetime | None = None
    expires_at: datetime | None = None
    container_id: str | None = None
    message: str | None = None
    current_snapshot: str | None = None
    current_disk: str | None = None  # with current_snapshot as its base image
    drives: tuple[str, ...] = ()  # "name" or "name:ro", mounted at /mnt/<name>
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    agent: str | None = None  # default agent of `paddock prompt` in this box
    disk_mb: int = 0  # from its type; enforced where the engine's filesystem has quotas
    owner_id: str | None = None  # the user whose box it is; None: the owner's
    idle_stop: int = 0  # seconds without use after which it stops (0: never)
    keep: int | None = None  # stop snapshots it keeps; None: the server's retention
    # From its template (domain/templates.py): its commands' environment and default user
    # and folder, and the command it starts at each boot.
    template: str | None = None  # the template's id
    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    workdir: str | None = None
    start_cmd: str | None = None

    @classmethod
    def of_type(
        cls, box_id: str, name: str, box_type: BoxType, image: str, now: datetime, **rest: Any
    ) -> Box:
        """A new box of `box_type`, not made yet (`rest`: any other field)."""
        return cls(
            id=box_id,
            name=name,
            type=box_type.name,
            image=image,
            state=BoxState.CREATING,
            desired=Desired.RUNNING,
            created_at=now,
            ttl=0,
            ttl_action=TtlAction.STOP,
            cpus=box_type.cpus,
            memory_mb=box_type.memory_mb,
            pids=box_type.pids,
            disk_mb=box_type.disk_mb,
            **rest,
        )

    @property
    def source_image(self) -> str:
        """What the box's container is (re)created from."""
        return self.current_snapshot or self.image

    def wants(self, desired: Desired) -> Box:
        """Record a new desired state, or say why it is not possible now."""
        # Asking again for what is already wanted is a no-op, like `docker stop` twice.
        if self.desired == desired and (
            desired != Desired.RUNNING or self.state == BoxState.RUNNING
        ):
            return self
        if self.state not in _ALLOWED[desired]:
            verb = {Desired.RUNNING: "resume", Desired.STOPPED: "stop", Desired.DELETED: "delete"}
            hint = {
                BoxState.RUNNING: "it is already running",
                BoxState.STOPPED: "it is already stopped",
                BoxState.STOPPING: "it is stopping; try again in a moment",
                BoxState.STARTING: "it is starting; try again in a moment",
                BoxState.CREATING: "it is being created; try again in a moment",
                BoxState.DELETING: "it is being deleted",
            }.get(self.state, f"it is {self.state.value}")
            raise InvalidState(f"cannot {verb[desired]} box {self.name}: {hint}")
        return replace(self, desired=desired)

    def deadline_from(self, now: datetime) -> datetime | None:
        return now + timedelta(seconds=self.ttl) if self.ttl > 0 else None


MAX_IDLE_STOP = 30 * 86400


def validate_idle_stop(seconds: int, shortest: int = 60) -> int:
    if seconds and not shortest <= seconds <= MAX_IDLE_STOP:
        raise InvalidRequest(
            f"an idle stop is {shortest} s to {MAX_IDLE_STOP // 86400} days without use (0: never)"
        )
    return seconds


def validate_keep(keep: int | None, limit: int) -> int | None:
    """Stop snapshots a box keeps: 1 to the most snapshots a box may have."""
    if keep is not None and not 1 <= keep <= limit:
        raise InvalidRequest(f"a box keeps 1 to {limit} stop snapshots")
    return keep


def new_box_id() -> str:
    return secrets.token_hex(6)


def looks_like_id(ref: str) -> bool:
    """Could `ref` be a box id or an id prefix long enough to resolve?"""
    return bool(_ID_LIKE.match(ref))


def validate_name(name: str) -> str:
    if name in RESERVED_NAMES:
        raise InvalidRequest(f"{name!r} is reserved; choose another box name")
    if not NAME_RE.match(name):
        raise InvalidRequest(
            f"invalid box name {name!r}: use 1-40 lowercase letters, digits and hyphens, "
            "starting with a letter and not ending with a hyphen"
        )
    if looks_like_id(name):
        raise InvalidRequest(
            f"invalid box name {name!r}: made of hex digits only, it could be read as a box "
            "id; add a letter after f or a hyphen"
        )
    return name


def validate_ttl(ttl: int) -> int:
    if ttl < 0:
        raise InvalidRequest(f"TTL must be 0 (no limit) or a positive number of seconds, not {ttl}")
    if ttl > MAX_TTL:
        raise InvalidRequest(f"TTL {ttl}s is longer than the maximum of {MAX_TTL}s (30 days)")
    return ttl


_ADJECTIVES = (
    "amber",
    "brisk",
    "calm",
    "deft",
    "eager",
    "fleet",
    "gentle",
    "hardy",
    "keen",
    "lively",
    "mellow",
    "nimble",
    "proud",
    "quick",
    "rapid",
    "steady",
    "swift",
    "tidy",
    "vivid",
    "wise",
)
_NOUNS = (
    "bay",
    "colt",
    "filly",
    "foal",
    "mare",
    "pony",
    "roan",
    "stallion",
    "trotter",
    "mustang",
    "arabian",
    "shire",
    "cob",
    "palomino",
    "pinto",
    "grey",
    "sorrel",
    "dun",
    "chestnut",
    "bronco",
)


def generated_name() -> str:
    return f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}-{secrets.token_hex(2)}"
