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
import functools
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
PER_OWNER = 8  # and one user's webhooks' at most
DUE_LOOKED_AT = 500  # due deliveries looked at for a fair pick
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
        self._running: dict[int, asyncio.Task[Delivery]] = {}  # delivery id -> its try
        self._running_hooks: dict[int, tuple[str, str]] = {}  # -> (webhook, its owner)

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
        # Never due for the delivery loop: this one try is its only one.
        (delivery,) = await self._repo.queue([hook], event, self._now(), due=float("inf"))
        done = await self._attempt(delivery, final=True)
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
        """Start what is due as places free up (a slow receiver holds its own place, never
        a round of everyone's), then sleep until the next is due, a new event comes, or a
        delivery ends."""
        while True:
            self._wake.clear()
            for d in await self._pick():
                task = asyncio.get_running_loop().create_task(self._attempt(d))
                self._running[d.id] = task
                task.add_done_callback(functools.partial(self._ended, d.id))
            next_at = await self._repo.next_due(set(self._running))
            wait = 60.0 if next_at is None else max(0.05, min(60.0, next_at - self._now()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _ended(self, delivery_id: int, _: object) -> None:
        self._running.pop(delivery_id, None)
        self._wake.set()

    async def deliver_due(self) -> int:
        """Deliver what is due now and wait for it (tests, and a drain)."""
        due = await self._pick()
        await asyncio.gather(*(self._attempt(d) for d in due), return_exceptions=True)
        return len(due)

    async def _pick(self) -> list[Delivery]:
        """What to try now, in fair shares: at most PER_WEBHOOK places for one webhook and
        PER_OWNER for one user's webhooks, counting what is being tried already."""
        free = AT_ONCE - len(self._running)
        if free <= 0:
            return []
        owners = {h.id: h.owner_id or "" for h in await self._repo.all()}
        per_hook: Counter[str] = Counter()
        per_owner: Counter[str] = Counter()
        for hook_id, owner in self._running_hooks.values():
            per_hook[hook_id] += 1
            per_owner[owner] += 1
        picked: list[Delivery] = []
        for d in await self._repo.due(self._now(), DUE_LOOKED_AT, PER_WEBHOOK):
            owner = owners.get(d.webhook_id, "")
            if d.id in self._running or len(picked) >= free:
                continue
            if per_hook[d.webhook_id] >= PER_WEBHOOK or per_owner[owner] >= PER_OWNER:
                continue
            per_hook[d.webhook_id] += 1
            per_owner[owner] += 1
            self._running_hooks[d.id] = (d.webhook_id, owner)
            picked.append(d)
        return picked

    async def _attempt(self, d: Delivery, final: bool = False) -> Delivery:
        """One try of `d` (`final`: its only one), recorded."""
        try:
            return await self._try(d, final)
        finally:
            self._running_hooks.pop(d.id, None)

    async def _try(self, d: Delivery, final: bool) -> Delivery:
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
        except Exception as exc:  # whatever else a receiver's answer makes: its own failure
            log.warning("webhook %s: delivery %d failed (%s)", d.webhook_id, d.id, exc)
            error = f"could not be sent ({type(exc).__name__})"
        tries = d.attempts + 1
        if status is not None and 200 <= status < 300:
            done = replace(d, state=DELIVERED, attempts=tries, status=status, error=None)
        elif tries >= ATTEMPTS or final:
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
            if public_only and not all(public_address(a) and not _ours(a) for a in addresses):
                raise Unreachable(
                    f"{host} is not a public address: a member's webhook goes to the internet "
                    "only (the server owner's may go anywhere)"
                )
            reader, writer = await _connect(addresses, port, self._tls if secure else None, host)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            try:
                return await _exchange(reader, writer, parts.netloc, target, headers, body)
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()


def _ours(address: str) -> bool:
    """Whether `address` is one of this host's own (a public one too): binding to it works
    only then."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


async def _connect(
    addresses: list[str], port: int, tls: ssl.SSLContext | None, host: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """To the first of the (checked) addresses that answers: a name with an IPv6 address
    this host cannot reach still works over its IPv4 one."""
    failed: OSError | None = None
    for address in dict.fromkeys(addresses):
        try:
            return await asyncio.open_connection(
                address, port, ssl=tls, server_hostname=host if tls else None
            )
        except OSError as exc:
            failed = exc
    assert failed is not None
    raise failed


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
