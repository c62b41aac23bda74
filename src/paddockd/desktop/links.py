"""Desktop links: short-lived tokens for one box, signed by the server (HMAC-SHA256 with a
key only paddockd can read), so a URL can be opened in a browser without the API token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from ..domain.errors import Unauthorized


@dataclass(frozen=True)
class Grant:
    box_id: str
    expires: int
    view_only: bool


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class DesktopLinks:
    def __init__(self, key_file: Path) -> None:
        if not key_file.exists():
            key_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        self._key = key_file.read_bytes()

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, box_id: str, ttl: int, view_only: bool, now: float | None = None) -> Grant:
        expires = int((now or time.time()) + ttl)
        return Grant(box_id, expires, view_only)

    def token(self, grant: Grant) -> str:
        body = _b64(
            json.dumps({"b": grant.box_id, "e": grant.expires, "v": grant.view_only}).encode()
        )
        return f"{body}.{self._sign(body)}"

    def verify(self, token: str, box_id: str, now: float | None = None) -> Grant:
        grant = self._signed_grant(token)
        if grant is None:
            raise Unauthorized(
                "this desktop link is not valid: ask for a new one (`paddock desktop BOX`)"
            )
        if grant.box_id != box_id:
            raise Unauthorized("this desktop link is for another box")
        if grant.expires < (now or time.time()):
            raise Unauthorized(
                "this desktop link has expired: ask for a new one (`paddock desktop BOX`)"
            )
        return grant

    def _signed_grant(self, token: str) -> Grant | None:
        """The grant in a token this server signed; None for anything else, however malformed
        (the token is whatever a URL carried)."""
        # Ours are base64url and a dot: ASCII. hmac.compare_digest raises TypeError on
        # non-ASCII str, which would turn a bad link into a 500.
        body, _, signature = token.partition(".")
        if not body or not token.isascii():
            return None
        if not hmac.compare_digest(signature, self._sign(body)):
            return None
        data = json.loads(_unb64(body))
        return Grant(str(data["b"]), int(data["e"]), bool(data["v"]))
