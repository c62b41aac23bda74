"""Webhooks: each user's box events (services/box_events.py) POSTed, signed, to the URL
they gave, with retries.

- Whose events: the server owner's webhooks get every box's; a member's, only their own
  boxes' (as `/v1/events` shows them).
- Delivery: one POST per event, signed (domain/webhooks.py), ten seconds to answer,
  redirects not followed. A 2xx is delivered; anything else is tried again after 1, 3, 9,
  ... times `retry_seconds` (at most an hour apart), eight tries in all, then failed.
  A box's events reach a webhook in order: a later one waits while an earlier one is
  being retried.
- Where to: paddockd runs as root on the host, so a member's webhook is delivered only to
  public addresses (every address its name resolves to is checked, and the connection
  goes to the checked one): never this host, its boxes, a private network or cloud
  metadata. The server owner's may go anywhere (a receiver on the host itself, too).
- The log: each webhook's last deliveries (`paddock webhook log`), with the receiver's
  status or why it failed; never the receiver's answer itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import urlsplit

import h11

from .. import __version__
from ..domain.accounts import User, sees
from ..domain.errors import InvalidRequest, NotFound
from ..domain.webhooks import (
    MAX_WEBHOOKS_PER_USER,
    SIGNATURE_HEADER,
    Event,
    Webhook,
    check_events,
    check_url,
    public_address,
    sign,
)
from ..store.webhooks import DELIVERED, FAILED, Delivery, WebhookRepository

log = logging.getLogger(__name__)

ATTEMPTS = 8
ANSWER_WITHIN = 10.0
MAX_BACKOFF = 3600.0
AT_ONCE = 16  # deliveries tried side by side (each another webhook's or box's)
PER_WEBHOOK = 4  # of which one webhook's at most
MAX_PENDING = 1000  # deliveries waiting for one webhook before new events are dropped
_MAX_HEAD = 16 << 10
_MAX_BODY = 64 << 10  # of a receiver's answer, read and thrown away


class Unreachable(Exception):
    """The receiver could not be reached or refused by address (the log says why)."""


class Sender(Protocol):
    async def post(
        self, url: str, headers: list[tuple[str, str]], body: bytes, public_only: bool
    ) -> int: ...


@dataclass(frozen=True)
class Attempt:
    """One delivery's outcome as the log shows it."""

    delivered: bool
    status: int | None
    error: str | None


class WebhookService:
    def __init__(
        self,
        repo: WebhookRepository,
        sender: Sender,
        retry_seconds: float = 1.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._repo = repo
        self._send = sender
        self._retry = retry_seconds
        self._now = now
        self._wake = asyncio.Event()

    # -- the user's side ----------------------------------------------------------------
    async def add(self, caller: User | None, url: str, events: list[str]) -> tuple[Webhook, str]:
        """A new webhook, and its signing secret (shown this once)."""
        url, wanted = check_url(url.strip()), check_events(events)
        owner_id = None if caller is None or caller.is_owner else caller.id
        if len([h for h in await self._repo.all() if h.owner_id == owner_id]) >= (
            MAX_WEBHOOKS_PER_USER
        ):
            raise InvalidRequest(f"at most {MAX_WEBHOOKS_PER_USER} webhooks each")
        hook = Webhook(secrets.token_hex(8), owner_id, url, wanted, self._now())
        secret = "whsec_" + secrets.token_urlsafe(32)
        await self._repo.add(hook, secret)
        return hook, secret

    async def listed(self, caller: User | None) -> list[Webhook]:
        return [h for h in await self._repo.all() if _mine(caller, h)]

    async def get(self, hook_id: str, caller: User | None) -> Webhook:
        for hook in await self._repo.all():
            if hook.id == hook_id and _mine(caller, hook):
                return hook
        raise NotFound(f"no webhook {hook_id!r} (see `paddock webhook ls`)")

    async def remove(self, hook_id: str, caller: User | None) -> None:
        await self._repo.remove((await self.get(hook_id, caller)).id)

    async def drop_owner(self, owner_id: str) -> int:
        """A removed member's webhooks go with them."""
        return await self._repo.remove_owner(owner_id)

    async def log(self, hook_id: str, caller: User | None, limit: int = 50) -> list[Delivery]:
        return await self._repo.log((await self.get(hook_id, caller)).id, limit)

    async def test(self, hook_id: str, caller: User | None) -> Attempt:
        """Send a `webhook.test` event at once (one try, no retry): what the receiver said."""
        hook = await self.get(hook_id, caller)
        event = Event(secrets.token_hex(8), "webhook.test", self._now(), "", "", hook.owner_id)
        await self._repo.queue([hook], event, self._now())
        (delivery,) = [d for d in await self._repo.log(hook.id, 5) if d.event_id == event.id]
        done = await self._attempt(replace(delivery, attempts=ATTEMPTS - 1))
        return Attempt(done.state == DELIVERED, done.status, done.error)

    # -- events in ------------------------------------------------------------------------
    async def publish(self, event: Event) -> None:
        hooks = [
            h
            for h in await self._repo.all()
            if h.wants(event.type) and (h.owner_id is None or h.owner_id == event.owner_id)
        ]
        pending = await self._repo.pending()
        for hook in [h for h in hooks if pending.get(h.id, 0) >= MAX_PENDING]:
            # A receiver that has not answered for thousands of events: no more are kept
            # for it until it catches up (the log shows the ones waiting).
            log.warning("webhook %s has %d deliveries waiting: event dropped", hook.id, MAX_PENDING)
            hooks.remove(hook)
        if hooks:
            await self._repo.queue(hooks, event, self._now())
            self._wake.set()

    # -- deliveries out -------------------------------------------------------------------
    async def run(self) -> None:
        """Deliver what is due, then sleep until the next is (or a new event comes)."""
        while True:
            await self.deliver_due()
            next_at = await self._repo.next_due()
            wait = 60.0 if next_at is None else max(0.05, min(60.0, next_at - self._now()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def deliver_due(self) -> int:
        # Fair shares: a webhook whose receiver is slow (ten seconds a try) takes a few of
        # the places, never all of them from everyone else's.
        taken: Counter[str] = Counter()
        due: list[Delivery] = []
        for d in await self._repo.due(self._now(), AT_ONCE * 4):
            if taken[d.webhook_id] < PER_WEBHOOK and len(due) < AT_ONCE:
                taken[d.webhook_id] += 1
                due.append(d)
        await asyncio.gather(*(self._attempt(d) for d in due))
        return len(due)

    async def _attempt(self, d: Delivery) -> Delivery:
        hooks = {h.id: h for h in await self._repo.all()}
        hook, secret = hooks.get(d.webhook_id), await self._repo.secret(d.webhook_id)
        if hook is None or secret is None:
            return d  # removed meanwhile: its deliveries went with it
        headers = [
            ("content-type", "application/json"),
            ("user-agent", f"paddock/{__version__}"),
            (SIGNATURE_HEADER, sign(secret, d.body)),
            ("paddock-event", d.event_type),
            ("paddock-delivery", str(d.id)),
        ]
        status, error = None, None
        try:
            status = await self._send.post(hook.url, headers, d.body, hook.owner_id is not None)
        except Unreachable as exc:
            error = str(exc)[:255]
        except (OSError, TimeoutError, ssl.SSLError, h11.ProtocolError) as exc:
            error = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:255]
        tries = d.attempts + 1
        if status is not None and 200 <= status < 300:
            done = replace(d, state=DELIVERED, attempts=tries, status=status, error=None)
        elif tries >= ATTEMPTS:
            done = replace(d, state=FAILED, attempts=tries, status=status, error=error)
        else:
            later = min(MAX_BACKOFF, self._retry * 3 ** (tries - 1))
            done = replace(d, attempts=tries, next_at=self._now() + later, status=status)
            done = replace(done, error=error)
        await self._repo.record(done)
        return done

    async def trim(self) -> int:
        return await self._repo.trim()


def _mine(caller: User | None, hook: Webhook) -> bool:
    """The owner sees every webhook; a member their own."""
    if caller is None or caller.is_owner:
        return True
    return hook.owner_id is not None and sees(caller, hook.owner_id)


class HttpSender:
    """One POST over HTTP/1.1 (h11, as paddockd's other clients), to an address checked
    before it is connected to."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls or ssl.create_default_context()

    async def post(
        self, url: str, headers: list[tuple[str, str]], body: bytes, public_only: bool
    ) -> int:
        parts = urlsplit(url)
        host = parts.hostname or ""
        secure = parts.scheme == "https"
        port = parts.port or (443 if secure else 80)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(ANSWER_WITHIN):
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses = [str(info[4][0]) for info in found]
            if not addresses:
                raise Unreachable(f"{host} has no address")
            if public_only and not all(public_address(a) for a in addresses):
                raise Unreachable(
                    f"{host} is not a public address: a member's webhook goes to the internet "
                    "only (the server owner's may go anywhere)"
                )
            reader, writer = await asyncio.open_connection(
                addresses[0],
                port,
                ssl=self._tls if secure else None,
                server_hostname=host if secure else None,
            )
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            try:
                return await _exchange(reader, writer, parts.netloc, target, headers, body)
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    netloc: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
) -> int:
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
    request = h11.Request(
        method="POST",
        target=target,
        headers=[
            ("host", netloc),
            ("content-length", str(len(body))),
            ("connection", "close"),
            *headers,
        ],
    )
    writer.write(
        conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
    )
    await writer.drain()
    read = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(8192)
            read += len(data)
            if read > _MAX_HEAD + _MAX_BODY:
                raise Unreachable("the receiver's answer is too long")
            conn.receive_data(data)
            continue
        if isinstance(event, h11.Response):
            return int(event.status_code)
        if isinstance(event, h11.ConnectionClosed):
            raise Unreachable("the receiver closed the connection without answering")
