"""Paddock's Python SDK: create boxes, run commands in them, move files in and out.

from paddock import Client
with Client() as c:            # URL and token from `paddock login`, or pass them
    box = c.create_box(type="small", ttl=3600)
    print(c.exec(box.name, "uname -a").stdout)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import AsyncClient, Client, ExecEvent, ExecSession, ExecStream, __version__
from ._exceptions import (
    AuthenticationFailed,
    CapacityExceeded,
    Conflict,
    ConnectionFailed,
    EngineUnavailable,
    InvalidRequest,
    InvalidState,
    NotFound,
    PaddockError,
    ServerError,
)

if TYPE_CHECKING:
    from ._models import Box, BoxType, BoxTypeList, ExecResult, PushResult, ServerStatus

_LAZY_MODELS = {"Box", "BoxType", "BoxTypeList", "ExecResult", "PushResult", "ServerStatus"}

__all__ = [
    "AsyncClient",
    "AuthenticationFailed",
    "Box",
    "BoxType",
    "BoxTypeList",
    "CapacityExceeded",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "EngineUnavailable",
    "ExecEvent",
    "ExecResult",
    "ExecSession",
    "ExecStream",
    "InvalidRequest",
    "InvalidState",
    "NotFound",
    "PaddockError",
    "PushResult",
    "ServerError",
    "ServerStatus",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Models pull in pydantic (~130 ms); load them only when someone asks.
    if name in _LAZY_MODELS:
        from . import _models

        return getattr(_models, name)
    raise AttributeError(f"module 'paddock' has no attribute {name!r}")
