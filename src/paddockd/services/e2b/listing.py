"""E2B's sandbox listing: its filters (metadata, state, template, start time) and its pages.

A page ends with an opaque `nextToken` (sent back as the `x-next-token` header), which names
the last sandbox given: the next page starts after it in the listing's order. Sandboxes are
ordered by creation time, which never changes (a start time does, on every resume), so a
sandbox made, resumed or deleted between two pages neither repeats nor pushes another one
out of the listing. Snapshots' pages (snapshots.py) use the same tokens."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from ...domain.box import Box, looks_like_id
from ...domain.errors import InvalidRequest

if TYPE_CHECKING:
    from .service import Sandbox

MAX_LIMIT = 100  # E2B's own bound on a page

Order = Literal["asc", "desc"]


@dataclass(frozen=True)
class Query:
    metadata: dict[str, str] = field(default_factory=dict)
    states: frozenset[str] = frozenset()
    template: str | None = None
    started_after: datetime | None = None
    order: Order = "asc"
    limit: int | None = None  # None: everything at once (the v1 route has no pages)
    next_token: str | None = None


_Key = tuple[float, str]


def _key(box: Box) -> _Key:
    return (box.created_at.timestamp(), box.id)


def _started(box: Box) -> datetime:
    return box.started_at or box.created_at


def encode_token(key: _Key) -> str:
    # repr() of a float reads back to the same float, so no page boundary drifts.
    return base64.urlsafe_b64encode(f"{key[0]!r} {key[1]}".encode()).decode().rstrip("=")


def decode_token(token: str, valid: Callable[[str], bool] = looks_like_id) -> _Key:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        stamp, _, ref = raw.partition(" ")
        key = (float(stamp), ref)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidRequest("invalid nextToken: pass back the x-next-token given") from None
    if not valid(ref):
        raise InvalidRequest("invalid nextToken: pass back the x-next-token given")
    return key


def page(items: Sequence[Sandbox], query: Query) -> tuple[list[Sandbox], str | None]:
    """The page `query` asks for, and the token of the next one (None: this is the last)."""
    wanted = [
        item
        for item in items
        if (not query.states or item.state in query.states)
        and (query.template is None or item.extras.template == query.template)
        and all(item.extras.metadata.get(k) == v for k, v in query.metadata.items())
        and (query.started_after is None or _started(item.box) >= query.started_after)
    ]
    descending = query.order == "desc"
    wanted.sort(key=lambda item: _key(item.box), reverse=descending)
    if query.next_token:
        after = decode_token(query.next_token)
        wanted = [
            item
            for item in wanted
            if (_key(item.box) < after if descending else _key(item.box) > after)
        ]
    if query.limit is None or len(wanted) <= query.limit:
        return wanted, None
    shown = wanted[: query.limit]
    return shown, encode_token(_key(shown[-1].box))
