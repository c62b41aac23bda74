"""People who use a server: the owner (made once, through the setup link) and, later,
members. Names and passwords are checked here; hashing and storage live elsewhere."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import InvalidRequest

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

    @property
    def holder(self) -> str | None:
        """Whose drives and provider keys this user's work uses: a member's own (their id);
        None, the owner's, for every owner account and server token."""
        return None if self.is_owner else self.id


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


def holder_of(caller: User | None) -> str | None:
    """`caller.holder`; for paddockd itself (None), the owner's."""
    return caller.holder if caller is not None else None


@dataclass(frozen=True)
class Holders:
    """Whose drives and provider keys a box uses: its owner's, told apart as `User.holder`
    tells them, given the ids of today's owner accounts. The owner accounts share one set,
    the owner's (None): those made before accounts (and boxes with no owner id) are the
    owner's with no account to hand them to, and every owner reaches everything anyway."""

    owner_ids: frozenset[str]

    def of(self, owner_id: str | None) -> str | None:
        # A removed account is no owner now: its boxes use what is under its id, as a
        # removed member's do (a removed owner account's boxes lose the owner's drives).
        return None if owner_id is None or owner_id in self.owner_ids else owner_id


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


@dataclass(frozen=True)
class TokenInfo:
    """An API token as listed: never its secret."""

    id: str
    name: str
    created_at: float
    last_used_at: float | None
    user_id: str | None
    expires_at: float | None = None
    scope: str | None = None  # "metrics": reads /metrics only
