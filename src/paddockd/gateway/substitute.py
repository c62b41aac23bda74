"""Placeholders in a request's headers swapped for the real values, and nothing else
changed. A placeholder may stand anywhere in a header's value, or inside HTTP Basic
credentials (git, pip and npm send a token as a password that way)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from ..domain.credentials import PLACEHOLDER_RE

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Swap:
    """What one placeholder becomes: `value` in its place, or, with `header`, that header
    set whole to `formatted` (the value in the form the host wants)."""

    value: bytes
    header: bytes | None = None  # lower-case
    formatted: bytes = b""


@dataclass(frozen=True)
class Swapped:
    headers: Headers
    used: frozenset[bytes]  # placeholders swapped
    unknown: frozenset[bytes]  # placeholders seen that `swaps` did not have (left as they are)


def placeholders_in(headers: Headers) -> set[bytes]:
    found: set[bytes] = set()
    for _, value in headers:
        found.update(PLACEHOLDER_RE.findall(value))
        basic = _basic(value)
        if basic is not None:
            found.update(PLACEHOLDER_RE.findall(basic))
    return found


def _basic(value: bytes) -> bytes | None:
    scheme, _, token = value.strip().partition(b" ")
    if scheme.lower() != b"basic" or not token:
        return None
    try:
        return base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


def _replace(text: bytes, swaps: dict[bytes, Swap], used: set[bytes], unknown: set[bytes]) -> bytes:
    for found in set(PLACEHOLDER_RE.findall(text)):
        swap = swaps.get(found)
        if swap is None or swap.header is not None:
            if swap is None:
                unknown.add(found)
            continue
        text = text.replace(found, swap.value)
        used.add(found)
    return text


def substitute(headers: Headers, swaps: dict[bytes, Swap]) -> Swapped:
    used: set[bytes] = set()
    unknown: set[bytes] = set()
    out: Headers = []
    for name, value in headers:
        lower = name.lower()
        whole = next(
            (
                (p, s)
                for p, s in swaps.items()
                if s.header == lower and p in (value + (_basic(value) or b""))
            ),
            None,
        )
        if whole is not None:
            used.add(whole[0])
            out.append((name, whole[1].formatted))
            continue
        basic = _basic(value)
        if basic is not None and PLACEHOLDER_RE.search(basic):
            swapped = _replace(basic, swaps, used, unknown)
            out.append((name, b"Basic " + base64.b64encode(swapped)))
            continue
        out.append((name, _replace(value, swaps, used, unknown)))
    return Swapped(out, frozenset(used), frozenset(unknown))
