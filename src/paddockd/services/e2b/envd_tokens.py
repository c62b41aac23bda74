"""The envd access token each E2B sandbox's SDK gets, and the signed file links made
with it.

E2B's SDKs sign `files.download_url`/`upload_url` with the sandbox's envd access token
(`v1_` + SHA-256 of `PATH:OPERATION:USER:TOKEN[:EXPIRATION]`), and the link names no
sandbox. So the token is one paddockd can make again from the sandbox's id alone, with a
key of its own: an HMAC, never stored, never the user's API key (which paddockd keeps
only as a hash). It works for that sandbox's envd calls and nothing else; a signed link
is found by trying each sandbox's token."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

PREFIX = "pde_"
TRAFFIC_PREFIX = "pdt_"
OPERATIONS = ("read", "write")


class EnvdTokens:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def of(self, sandbox_id: str) -> str:
        mac = hmac.new(self._key, f"envd:{sandbox_id}".encode(), hashlib.sha256).digest()
        return PREFIX + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def traffic(self, sandbox_id: str) -> str:
        """The token that opens a private sandbox's ports (E2B's trafficAccessToken): of
        another purpose than the envd one, so neither opens what the other does."""
        mac = hmac.new(self._key, f"traffic:{sandbox_id}".encode(), hashlib.sha256).digest()
        return TRAFFIC_PREFIX + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def opens(self, key: str, sandbox_id: str) -> bool:
        """Whether `key` is the envd access token of `sandbox_id`."""
        given = key.encode("latin-1", "replace")  # a header's text: any byte may be in it
        return key.startswith(PREFIX) and hmac.compare_digest(given, self.of(sandbox_id).encode())

    def signature(
        self, sandbox_id: str, path: str, operation: str, user: str, expiration: int | None
    ) -> str:
        """The signature E2B's SDK makes for a link to `path` in this sandbox."""
        raw = f"{path}:{operation}:{user}:{self.of(sandbox_id)}"
        if expiration is not None:
            raw += f":{expiration}"
        digest = hashlib.sha256(raw.encode()).digest()
        return "v1_" + base64.b64encode(digest).rstrip(b"=").decode()

    def signer(
        self,
        sandbox_ids: Iterable[str],
        path: str,
        operation: str,
        user: str,
        signature: str,
        expiration: int | None,
    ) -> str | None:
        """The sandbox whose token made `signature`, if one did."""
        found = None
        for sandbox_id in sandbox_ids:
            expected = self.signature(sandbox_id, path, operation, user, expiration)
            if hmac.compare_digest(expected, signature):
                found = sandbox_id
        return found
