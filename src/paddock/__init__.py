"""Paddock's Python SDK: create boxes, run commands in them, move files in and out.

from paddock import Client
with Client() as c:            # URL and token from `paddock login`, or pass them
    box = c.create_box(type="small", ttl=3600)
    print(c.exec(box.name, "uname -a").stdout)
"""

from __future__ import annotations

from ._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._client import (
        AsyncClient,
        AsyncExecSession,
        AsyncExecStream,
        Client,
        ExecEvent,
        ExecSession,
        ExecStream,
    )
    from .wire.errors import (
        AuthenticationFailed,
        CapacityExceeded,
        Conflict,
        ConnectionFailed,
        DesktopFailed,
        EngineUnavailable,
        Forbidden,
        InvalidRequest,
        InvalidState,
        IsolationFailed,
        NotFound,
        PaddockError,
        PayloadTooLarge,
        ServerError,
        StorageLow,
        TooManyAttempts,
    )
    from .wire.models import (
        AgentInfo,
        AuditEvent,
        Box,
        BoxStats,
        BoxType,
        BoxTypeList,
        Credential,
        CredentialUse,
        DesktopLink,
        DeviceCode,
        DeviceToken,
        Drive,
        EgressEvent,
        ExecResult,
        FileEntry,
        FileList,
        Invite,
        Member,
        MemberRemoved,
        NetworkSpec,
        NetworkSuggestion,
        NewToken,
        NewWebhook,
        PaddockEvent,
        Preview,
        PushResult,
        RunInfo,
        Secret,
        ServerLogLine,
        ServerStatus,
        Setting,
        Snapshot,
        SshHostKey,
        SshKey,
        Template,
        TokenInfo,
        Webhook,
        WebhookDelivery,
        WebhookTest,
    )

# Everything is loaded on first use: `paddock exec` and `paddock --version` must not pay
# for pydantic or for parts of the SDK they do not touch. A name of `__all__` is looked up
# in these modules, the lightest first.
_MODULES = ("wire.errors", "_client", "wire.models")

__all__ = [
    "AgentInfo",
    "AsyncClient",
    "AsyncExecSession",
    "AsyncExecStream",
    "AuditEvent",
    "AuthenticationFailed",
    "Box",
    "BoxStats",
    "BoxType",
    "BoxTypeList",
    "CapacityExceeded",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Credential",
    "CredentialUse",
    "DesktopFailed",
    "DesktopLink",
    "DeviceCode",
    "DeviceToken",
    "Drive",
    "EgressEvent",
    "EngineUnavailable",
    "ExecEvent",
    "ExecResult",
    "ExecSession",
    "ExecStream",
    "FileEntry",
    "FileList",
    "Forbidden",
    "InvalidRequest",
    "InvalidState",
    "Invite",
    "IsolationFailed",
    "Member",
    "MemberRemoved",
    "NetworkSpec",
    "NetworkSuggestion",
    "NewToken",
    "NewWebhook",
    "NotFound",
    "PaddockError",
    "PaddockEvent",
    "PayloadTooLarge",
    "Preview",
    "PushResult",
    "RunInfo",
    "Secret",
    "ServerError",
    "ServerLogLine",
    "ServerStatus",
    "Setting",
    "Snapshot",
    "SshHostKey",
    "SshKey",
    "StorageLow",
    "Template",
    "TokenInfo",
    "TooManyAttempts",
    "Webhook",
    "WebhookDelivery",
    "WebhookTest",
    "__version__",
]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module 'paddock' has no attribute {name!r}")
    from importlib import import_module

    for module in _MODULES:
        value = getattr(import_module(f"paddock.{module}"), name, None)
        if value is not None:
            globals()[name] = value
            return value
    raise AttributeError(f"paddock.{name} is listed but defined nowhere")
