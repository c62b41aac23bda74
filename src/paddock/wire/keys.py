"""A Paddock token in the shape E2B's SDKs accept as an API key.

SDKs up to 2.45 refuse a key that is not `e2b_` and hex digits (`E2B_VALIDATE_API_KEY`
turns the check off). The same token, hex-encoded behind `e2b_`, passes it; Paddock's
E2B API reads it back. No new secret: whoever holds one form holds the other."""

from __future__ import annotations

import re

TOKEN_PREFIX = "pdk_"
E2B_PREFIX = "e2b_"
# A token is well under this; a longer key is no token of ours, and is not decoded.
_HEX = re.compile(r"(?:[0-9a-f]{2}){4,256}")


def e2b_key(token: str) -> str:
    """`token` as E2B's key format."""
    return E2B_PREFIX + token.encode().hex()


def from_e2b_key(key: str) -> str:
    """The Paddock token behind a key in E2B's format (`e2b_` + hex, or `e2b_pdk_...`);
    any other key as it is."""
    body = key.removeprefix(E2B_PREFIX)
    if body == key:
        return key
    if body.startswith(TOKEN_PREFIX):
        return body
    if _HEX.fullmatch(body):
        decoded = bytes.fromhex(body).decode("ascii", errors="replace")
        if decoded.startswith(TOKEN_PREFIX) and decoded.isprintable():
            return decoded
    return key
