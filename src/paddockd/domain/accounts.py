"""People who use a server: the owner (made once, through the setup link) and, later,
members. Names and passwords are checked here; hashing and storage live elsewhere."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import Forbidden, InvalidRequest

MIN_PASSWORD = 12
MAX_PASSWORD = 1024  # argon2 takes any length; a cap keeps a login request cheap to refuse
_USERNAME = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")


class Role(str, Enum):
    OWNER = "owner"
    MEMBER = "member"


@dataclass(frozen=True)
class User:
    id: str
    username: str
    role: Role

    @property
    def is_owner(self) -> bool:
        return self.role == Role.OWNER

    @property
    def stored_id(self) -> str | None:
        """What a row this user owns records: None for SERVER (rows with no owner are the
        owner's)."""
        return self.id or None


@dataclass(frozen=True)
class Limits:
    """A member's share of the server, set by the owner (None: no limit of its own; the
    server's capacity still applies). Boxes count whether running or stopped (they hold
    disk); CPU and memory count the boxes that are running."""

    max_boxes: int | None = None
    max_cpus: float | None = None
    max_memory_mb: int | None = None

    def __post_init__(self) -> None:
        for name, value in (
            ("max_boxes", self.max_boxes),
            ("max_cpus", self.max_cpus),
            ("max_memory_mb", self.max_memory_mb),
        ):
            if value is not None and value <= 0:
                raise InvalidRequest(f"{name} is a positive number, or null for no limit")


NO_LIMITS = Limits()


# Who a token made on the server (`paddockd token create`, no user) acts as while no owner
# account exists yet: the owner, with no id. Once the owner exists, such tokens act as them.
SERVER = User(id="", username="owner", role=Role.OWNER)


def owner_only(caller: User | None, why: str) -> None:
    """Refuse a member what is the owner's alone (provider keys, drives: they have no
    owner of their own yet, so every one is the owner's)."""
    if caller is not None and not caller.is_owner:
        raise Forbidden(why)


def sees(caller: User | None, owner_id: str | None) -> bool:
    """Whether `caller` may see and act on something owned by `owner_id` (None: the owner's,
    made before accounts or by a server token). A None caller is paddockd itself."""
    return caller is None or caller.is_owner or (owner_id is not None and owner_id == caller.id)


def validate_username(name: str) -> str:
    name = name.strip().lower()
    if not _USERNAME.match(name):
        raise InvalidRequest(
            "a username is 2-32 characters: a-z first, then a-z, 0-9, '.', '_' or '-'"
        )
    return name


def validate_password(password: str, username: str = "") -> str:
    if len(password) < MIN_PASSWORD:
        raise InvalidRequest(f"a password has at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise InvalidRequest(f"a password has at most {MAX_PASSWORD} characters")
    if username and username.lower() in password.lower():
        raise InvalidRequest("a password must not contain the username")
    return password
