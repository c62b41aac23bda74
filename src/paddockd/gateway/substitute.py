"""Placeholders in a request's headers swapped for the real values, and nothing else
changed. A placeholder may stand anywhere in a header's value, or inside HTTP Basic
credentials in `Authorization` (git, pip and npm send a token as a password that way);
with `where`, only in those headers (a provider's key goes in its auth header, nowhere an
error message could quote it back).

What an upstream may echo of a value is masked on the way back (relay.py `Masker`): the
value itself, and the runs of base64 any encoding of it contains."""

from __future__ import annotations

import base64
import binascii
import html
import json
from dataclasses import dataclass
from urllib.parse import quote

from ..domain.credentials import PLACEHOLDER_RE

Headers = list[tuple[bytes, bytes]]
AUTHORIZATION = b"authorization"


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
    misplaced: frozenset[bytes]  # placeholders in headers `where` does not name


def _basic(name: bytes, value: bytes) -> bytes | None:
    """The credentials of `Authorization: Basic ...`, decoded; None for anything else."""
    if name.lower() != AUTHORIZATION:
        return None
    scheme, _, token = value.strip().partition(b" ")
    if scheme.lower() != b"basic" or not token:
        return None
    try:
        return base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


def _found(name: bytes, value: bytes) -> set[bytes]:
    found = set(PLACEHOLDER_RE.findall(value))
    basic = _basic(name, value)
    if basic is not None:
        found.update(PLACEHOLDER_RE.findall(basic))
    return found


def placeholders_in(headers: Headers) -> set[bytes]:
    found: set[bytes] = set()
    for name, value in headers:
        found |= _found(name, value)
    return found


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


def substitute(
    headers: Headers, swaps: dict[bytes, Swap], where: frozenset[bytes] | None = None
) -> Swapped:
    used: set[bytes] = set()
    unknown: set[bytes] = set()
    misplaced: set[bytes] = set()
    out: Headers = []
    for name, value in headers:
        lower = name.lower()
        here = _found(name, value)
        if here and where is not None and lower not in where:
            misplaced |= here
            out.append((name, value))
            continue
        whole = next((p for p, s in swaps.items() if s.header == lower and p in here), None)
        if whole is not None:
            used.add(whole)
            out.append((name, swaps[whole].formatted))
            continue
        basic = _basic(name, value)
        if basic is not None and PLACEHOLDER_RE.search(basic):
            swapped = _replace(basic, swaps, used, unknown)
            out.append((name, b"Basic " + base64.b64encode(swapped)))
            continue
        out.append((name, _replace(value, swaps, used, unknown)))
    return Swapped(out, frozenset(used), frozenset(unknown), frozenset(misplaced))


def encodings(value: bytes) -> set[bytes]:
    """What an answer may carry of `value`: itself, percent-encoded, and the runs of base64
    that any base64 of data holding it contains (one per alignment: the quads made of the
    value's bytes alone)."""
    text = value.decode("latin-1")
    # As JSON and HTML write it, for a host that echoes a request in either.
    escaped = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=True)[1:-1], html.escape(text)}
    forms = {value, quote(value, safe="").encode(), *(e.encode("latin-1") for e in escaped)}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + value)
        start = 4 if offset else 0  # the first quad holds the padding bytes
        whole = (offset + len(value)) // 3 * 4  # quads with no byte after the value
        middle = encoded[start:whole]
        if len(middle) >= 8:
            forms.add(middle)
    return {f for f in forms if f}
