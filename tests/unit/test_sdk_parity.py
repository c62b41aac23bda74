"""Every operation of the API has a method in `Client` and in `AsyncClient`, with the same
parameters, and every public method maps to an operation (or is a named convenience)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import paddock
from paddock import AsyncClient, Client

SPEC = Path(__file__).resolve().parents[2] / "spec" / "openapi.json"

# (method, path) in the spec -> the SDK's name for it.
OPERATIONS = {
    ("GET", "/v1/health"): "health",
    ("GET", "/v1/status"): "status",
    ("POST", "/v1/device/code"): "device_code",
    ("POST", "/v1/device/token"): "device_token",
    ("GET", "/v1/types"): "box_types",
    ("GET", "/v1/agents"): "list_agents",
    ("POST", "/v1/images/build"): "build_image",
    ("GET", "/v1/boxes"): "list_boxes",
    ("POST", "/v1/boxes"): "create_box",
    ("GET", "/v1/boxes/{ref}"): "get_box",
    ("DELETE", "/v1/boxes/{ref}"): "delete_box",
    ("GET", "/v1/boxes/{ref}/logs"): "box_logs",
    ("POST", "/v1/boxes/{ref}/stop"): "stop_box",
    ("POST", "/v1/boxes/{ref}/resume"): "resume_box",
    ("POST", "/v1/boxes/{ref}/extend"): "extend_box",
    ("GET", "/v1/boxes/{ref}/stats"): "box_stats",
    ("GET", "/v1/stats"): "stats",
    ("POST", "/v1/boxes/{ref}/exec"): "exec_stream",
    ("GET", "/v1/boxes/{ref}/files"): "pull",
    ("PUT", "/v1/boxes/{ref}/files/copy"): "push",
    ("GET", "/v1/boxes/{ref}/files/stat"): "stat",
    ("GET", "/v1/boxes/{ref}/files/list"): "list_files",
    ("GET", "/v1/boxes/{ref}/files/download"): "download",
    ("GET", "/v1/boxes/{ref}/export"): "export_box",
    ("POST", "/v1/imports"): "import_box",
    ("POST", "/v1/boxes/{ref}/fork"): "fork_box",
    ("POST", "/v1/boxes/{ref}/forks"): "fork_boxes",
    ("POST", "/v1/boxes/{ref}/restore"): "restore_box",
    ("GET", "/v1/boxes/{ref}/snapshots"): "list_snapshots",
    ("POST", "/v1/boxes/{ref}/snapshots"): "snapshot_box",
    ("DELETE", "/v1/boxes/{ref}/snapshots/{snap}"): "delete_snapshot",
    ("GET", "/v1/boxes/{ref}/network"): "get_network",
    ("PUT", "/v1/boxes/{ref}/network"): "set_network",
    ("GET", "/v1/boxes/{ref}/network/log"): "network_log",
    ("GET", "/v1/boxes/{ref}/network/suggest"): "suggest_network",
    ("POST", "/v1/boxes/{ref}/desktop"): "desktop_link",
    ("POST", "/v1/boxes/{ref}/desktop/input"): "desktop_click",
    ("GET", "/v1/boxes/{ref}/desktop/screenshot"): "screenshot",
    ("GET", "/v1/boxes/{ref}/auth"): "box_credentials",
    ("PUT", "/v1/boxes/{ref}/auth/{provider}"): "attach_credential",
    ("DELETE", "/v1/boxes/{ref}/auth/{provider}"): "detach_credential",
    ("GET", "/v1/auth"): "list_credentials",
    ("PUT", "/v1/auth/{provider}"): "set_credential",
    ("DELETE", "/v1/auth/{provider}"): "delete_credential",
    ("GET", "/v1/auth/log"): "credential_log",
    ("GET", "/v1/templates"): "list_templates",
    ("POST", "/v1/templates"): "create_template",
    ("GET", "/v1/templates/{name}"): "get_template",
    ("DELETE", "/v1/templates/{name}"): "delete_template",
    ("POST", "/v1/templates/{name}/build"): "build_template",
    ("GET", "/v1/templates/{name}/log"): "follow_template_build",
    ("POST", "/v1/templates/{name}/rebuild"): "rebuild_template",
    ("PUT", "/v1/templates/{name}/shared"): "share_template",
    ("GET", "/v1/secrets"): "list_secrets",
    ("PUT", "/v1/secrets/{name}"): "set_secret",
    ("DELETE", "/v1/secrets/{name}"): "delete_secret",
    ("GET", "/v1/secrets/log"): "secret_log",
    ("GET", "/v1/boxes/{ref}/secrets"): "box_secrets",
    ("PUT", "/v1/boxes/{ref}/secrets/{name}"): "attach_secret",
    ("DELETE", "/v1/boxes/{ref}/secrets/{name}"): "detach_secret",
    ("GET", "/v1/audit"): "audit",
    ("GET", "/v1/log"): "server_log",
    ("GET", "/v1/settings"): "settings",
    ("GET", "/v1/settings/{name}"): "get_setting",
    ("PUT", "/v1/settings/{name}"): "set_setting",
    ("DELETE", "/v1/settings/{name}"): "reset_setting",
    ("POST", "/v1/webhooks"): "add_webhook",
    ("GET", "/v1/webhooks"): "list_webhooks",
    ("DELETE", "/v1/webhooks/{hook_id}"): "delete_webhook",
    ("POST", "/v1/webhooks/{hook_id}/test"): "test_webhook",
    ("GET", "/v1/webhooks/{hook_id}/deliveries"): "webhook_deliveries",
    ("GET", "/v1/ssh-keys"): "list_ssh_keys",
    ("PUT", "/v1/ssh-keys/{name}"): "add_ssh_key",
    ("DELETE", "/v1/ssh-keys/{name}"): "delete_ssh_key",
    ("GET", "/v1/boxes/{ref}/ssh"): "box_ssh_host_key",
    ("GET", "/v1/boxes/{ref}/runs"): "list_runs",
    ("POST", "/v1/boxes/{ref}/runs"): "start_run",
    ("GET", "/v1/runs/{run_id}"): "get_run",
    ("POST", "/v1/runs/{run_id}/stop"): "stop_run",
    ("GET", "/v1/runs/{run_id}/log"): "follow_run",
    ("GET", "/v1/drives"): "list_drives",
    ("POST", "/v1/drives"): "create_drive",
    ("DELETE", "/v1/drives/{name}"): "delete_drive",
    ("GET", "/v1/tokens"): "list_tokens",
    ("POST", "/v1/tokens"): "create_token",
    ("DELETE", "/v1/tokens/{token_id}"): "delete_token",
    ("POST", "/v1/members/invites"): "invite_member",
    ("GET", "/v1/members"): "list_members",
    ("DELETE", "/v1/members/{username}"): "remove_member",
    ("PUT", "/v1/members/{username}/limits"): "set_member_limits",
    ("POST", "/v1/boxes/{ref}/previews"): "create_preview",
    ("GET", "/v1/boxes/{ref}/previews"): "list_previews",
    ("GET", "/v1/previews"): "list_previews",
    ("DELETE", "/v1/previews/{preview_id}"): "delete_preview",
    ("GET", "/v1/events"): "follow_events",
}
# Operations no client method sends, each with why.
NOT_IN_SDK = {
    ("PUT", "/v1/boxes/{ref}/files"): "a tar into a folder, as the dashboard uploads; push "
    "places by /files/copy instead",
}
# Methods over the same operations, or purely local: each says what it builds on.
CONVENIENCES = {
    "exec": "exec_stream, waited for",
    "exec_desktop": "POST /exec with desktop=true",
    "desktop_type": "POST /desktop/input",
    "desktop_key": "POST /desktop/input",
    "follow_network_log": "GET /network/log?follow=true",
    "prompt": "start_run + follow_run",
    "push_size": "local: the bytes a push would send",
    "exec_session": "the exec WebSocket (not an OpenAPI operation)",
    "start": "POST /exec with detach=true",
    "close": "",
    "aclose": "",
}


def spec_operations() -> set[tuple[str, str]]:
    spec = json.loads(SPEC.read_text())
    return {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}


def public(cls: type) -> set[str]:
    from paddock._client import _operation

    def is_method(name: str) -> bool:
        member = inspect.getattr_static(cls, name)
        return isinstance(member, _operation) or callable(member)

    return {n for n in dir(cls) if not n.startswith("_") and is_method(n)}


def test_every_operation_has_a_method_in_both_clients() -> None:
    assert spec_operations() == set(OPERATIONS) | set(NOT_IN_SDK), (
        "update OPERATIONS and the SDK together"
    )
    for name in OPERATIONS.values():
        assert hasattr(Client, name), f"Client lacks {name}"
        assert hasattr(AsyncClient, name), f"AsyncClient lacks {name}"


def test_every_public_method_maps_to_an_operation() -> None:
    known = set(OPERATIONS.values()) | set(CONVENIENCES)
    assert public(Client) - known == set()
    assert public(AsyncClient) - known == set()
    assert public(AsyncClient) >= public(Client) - {"close"}


def test_both_clients_take_the_same_parameters() -> None:
    for name in sorted(public(Client) & public(AsyncClient) - {"close"}):
        sync = inspect.signature(getattr(Client(url="http://x", token="t"), name))
        async_ = inspect.signature(getattr(AsyncClient(url="http://x", token="t"), name))
        assert list(sync.parameters) == list(async_.parameters), name


def test_the_models_methods_return_are_exported() -> None:
    import re

    from paddock.wire import models as _models

    models = {n for n, v in vars(_models).items() if isinstance(v, type) and n[0].isupper()}
    returned: set[str] = set()
    for cls in (Client, AsyncClient):
        for name in public(cls):
            member = inspect.getattr_static(cls, name)
            build = getattr(member, "_build", member)
            hint = str(getattr(build, "__annotations__", {}).get("return", ""))
            returned |= set(re.findall(r"[A-Za-z_]+", hint)) & models - {"Any"}
    assert returned, "no model found in the return annotations"
    assert returned - set(paddock.__all__) == set()


def test_both_clients_return_the_same_things() -> None:
    """A method of `AsyncClient` gives what `Client`'s gives, awaited or `async for`-ed."""
    import re

    def returns(cls: type, name: str) -> str:
        member = inspect.getattr_static(cls, name)
        build = getattr(member, "_build", member)  # an operation: one builder for both
        return str(build.__annotations__.get("return", ""))

    def as_async(hint: str) -> str:
        hint = re.sub(r"\bIterator\b", "AsyncIterator", hint)
        return re.sub(r"\b(ExecStream|ExecSession)\b", r"Async\1", hint)

    for name in sorted(public(Client) & public(AsyncClient) - {"close"}):
        assert as_async(returns(Client, name)) == returns(AsyncClient, name), name
