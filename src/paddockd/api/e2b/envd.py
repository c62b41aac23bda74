"""What every envd call shares: who calls (the Paddock token as X-Access-Token), which box
(the E2b-Sandbox-Id header the SDK sends), as which user in the box (HTTP Basic `user:`), and
Paddock's errors as Connect's."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from ...domain import errors as e
from ...domain.accounts import User
from ...domain.box import Box
from ...services.boxes import BOX_USER
from ...services.e2b.service import E2BService, api_key

SANDBOX_HEADER = "e2b-sandbox-id"
_KEEPALIVE = "keepalive-ping-interval"
# E2B's templates run commands as `user`; a Paddock box's user is abc (uid 1000).
_USERS = {"user": BOX_USER, "": BOX_USER}

_CODES: dict[type[e.PaddockError], Code] = {
    e.NotFound: Code.NOT_FOUND,
    e.InvalidRequest: Code.INVALID_ARGUMENT,
    e.PayloadTooLarge: Code.RESOURCE_EXHAUSTED,
    e.Conflict: Code.ALREADY_EXISTS,
    e.InvalidState: Code.FAILED_PRECONDITION,
    e.CapacityExceeded: Code.RESOURCE_EXHAUSTED,
    e.Unauthorized: Code.UNAUTHENTICATED,
    e.Forbidden: Code.PERMISSION_DENIED,
}


def connect_error(exc: e.PaddockError) -> ConnectError:
    return ConnectError(_CODES.get(type(exc), Code.INTERNAL), f"{exc.message} ({exc.code})")


Req = TypeVar("Req")
Res = TypeVar("Res")
Ctx = RequestContext[object, object]


async def _answered(answer: Awaitable[Res]) -> Res:
    try:
        return await answer
    except e.PaddockError as exc:
        raise connect_error(exc) from None


class PaddockErrors:
    """A Connect interceptor for every envd call: Paddock's errors, raised anywhere in a
    handler (or in a stream it is answering), leave as Connect's with their codes."""

    async def intercept_unary(
        self, call_next: Callable[[Req, Ctx], Awaitable[Res]], request: Req, ctx: Ctx, /
    ) -> Res:
        return await _answered(call_next(request, ctx))

    async def intercept_client_stream(
        self,
        call_next: Callable[[AsyncIterator[Req], Ctx], Awaitable[Res]],
        request: AsyncIterator[Req],
        ctx: Ctx,
        /,
    ) -> Res:
        return await _answered(call_next(request, ctx))

    async def intercept_server_stream(
        self, call_next: Callable[[Req, Ctx], AsyncIterator[Res]], request: Req, ctx: Ctx, /
    ) -> AsyncIterator[Res]:
        try:
            async for message in call_next(request, ctx):
                yield message
        except e.PaddockError as exc:
            raise connect_error(exc) from None


def keepalive(headers: Callable[[str], str | None]) -> float:
    """Seconds of quiet after which a stream sends a keepalive, as the SDK asks (it sends
    one too, for proxies that close idle connections)."""
    try:
        return min(max(float(headers(_KEEPALIVE) or "50"), 1.0), 300.0)
    except ValueError:
        return 50.0


@dataclass(frozen=True)
class Target:
    caller: User
    box: Box
    user: str  # who runs the operation in the box


def box_user(authorization: str | None) -> str:
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return BOX_USER
    try:
        name = base64.b64decode(value.strip(), validate=True).decode().partition(":")[0]
    except (binascii.Error, UnicodeDecodeError):
        raise e.InvalidRequest("the Authorization header's user is not valid base64") from None
    return named_user(name)


def named_user(name: str) -> str:
    """The box's user an E2B user name stands for."""
    return _USERS.get(name, name)


async def target(
    e2b: E2BService, headers: Callable[[str], str | None], running: bool = True
) -> Target:
    """The caller and their sandbox; another user's sandbox is missing, as in the API."""
    sandbox_id = headers(SANDBOX_HEADER) or ""
    caller = await e2b.authenticate(api_key(headers), sandbox_id)
    if not sandbox_id:
        raise e.InvalidRequest("missing E2b-Sandbox-Id header: set E2B_SANDBOX_URL")
    box = (await e2b.get(caller, sandbox_id)).box
    if running:
        box = await e2b.boxes.running(box.id, caller)
    return Target(caller, box, box_user(headers("authorization")))
