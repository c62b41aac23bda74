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
