"""Preview URLs: make, list and remove them; decide who may use one; open a connection to
the box's port for the proxy (api/preview_proxy.py), waking a stopped box.

paddockd reaches the port on the box's own loopback, through a socket made in the box's
network namespace (runtime/netns.py): no route from the host to box addresses, and a
server the box binds to 127.0.0.1 is reachable too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import anyio.to_thread

from ..domain.accounts import User, sees
from ..domain.box import Box, BoxState, Desired
from ..domain.errors import InvalidState, NotFound, PaddockError
from ..domain.previews import (
    TOKEN_PARAM,
    Preview,
    Target,
    check_secret,
    secret,
    target_of,
    validate_port,
    validate_ttl,
)
from ..runtime.base import BoxNetworkHandle, Runtime
from ..store.previews import PreviewRepository
from .activity import Activity
from .boxes import BoxService

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0


class Waking(PaddockError):
    """The box was stopped; it is starting for this request."""

    code = "waking"


@dataclass(frozen=True)
class Listed:
    preview: Preview
    box: Box
    url: str


class PortHosts(Protocol):
    """Ports a box answers on without a preview of its own: an E2B sandbox's
    `PORT-ID.HOST` (services/e2b/hosts.py)."""

    async def find(self, box_id: str, port: int) -> Preview | None: ...

    def admits(self, preview: Preview, token: str) -> bool:
        """Whether `token` (the traffic header's) opens this private port."""
        ...


class PreviewService:
    def __init__(
        self,
        repo: PreviewRepository,
        boxes: BoxService,
        runtime: Runtime,
        key: bytes,
        public_url: Callable[[], str],
        hostname: Callable[[], str | None],
        activity: Activity,
        owner_active: Callable[[str], Awaitable[bool]] | None = None,
        routed_host: Callable[[], str | None] | None = None,
    ) -> None:
        self._repo = repo
        self._boxes = boxes
        self._rt = runtime
        self._key = key
        self._public_url = public_url
        self.hostname = hostname
        # The host whose PORT-BOXID. names the proxy answers: the hostname, or where the
        # server is on loopback, `localhost` (which URLs still do not use: not every
        # client resolves its subdomains).
        self.routed_host = routed_host or hostname
        self._activity = activity
        # Whether a box's owner may still run it (a removed member may not).
        self._owner_active = owner_active
        # box id -> (container id, its namespace): checked once per container start.
        self._namespaces: dict[str, tuple[str, BoxNetworkHandle]] = {}
        self._waking: dict[str, asyncio.Task[None]] = {}
        # Live previews by (box id, port): every request looks one up. paddockd is the only
        # writer, so each change below drops what it changes. Misses are not kept (a flood
        # of made-up names must not grow this).
        self._found: dict[tuple[str, int], Preview] = {}
        self.hosts: PortHosts | None = None

    # -- the owner's side -----------------------------------------------------------------
    async def create(
        self, ref: str, port: int, public: bool, ttl: int | None, caller: User | None
    ) -> Listed:
        box = await self._boxes.resolve(ref, caller)
        validate_port(port)
        lasts = validate_ttl(ttl)
        now = time.time()
        preview = Preview(
            id=secrets.token_hex(8),
            box_id=box.id,
            port=port,
            public=public,
            created_at=now,
            expires_at=now + lasts if lasts else None,
            owner_id=box.owner_id,
        )
        await self._repo.put(preview)
        self._found.pop((box.id, port), None)
        return Listed(preview, box, self.url(preview))

    async def listed(self, caller: User | None, ref: str | None = None) -> list[Listed]:
        boxes = {b.id: b for b in await self._boxes.listed(caller)}
        wanted = (await self._boxes.resolve(ref, caller)).id if ref else None
        return [
            Listed(p, boxes[p.box_id], self.url(p))
            for p in await self._repo.all()
            if p.box_id in boxes and not p.expired() and wanted in (None, p.box_id)
        ]

    async def delete(self, preview_id: str, caller: User | None) -> None:
        preview = await self._repo.get(preview_id)
        if preview is None or not await self._boxes.visible(preview.box_id, caller):
            raise NotFound(f"no preview {preview_id!r} (see `paddock host ls`)")
        await self._repo.delete(preview_id)
        self._found.pop((preview.box_id, preview.port), None)

    def url(self, preview: Preview) -> str:
        host = self.hostname()
        base = self._public_url().rstrip("/")
        if host:
            scheme, _, rest = base.partition("://")
            port = rest.partition(":")[2]
            address = f"{scheme}://{preview.port}-{preview.box_id}.{host}"
            address += f":{port}/" if port else "/"
        else:
            address = f"{base}/preview/{preview.box_id}/{preview.port}/"
        if not preview.public:
            address += f"?{TOKEN_PARAM}={secret(self._key, preview.id)}"
        return address

    # -- the proxy's side -----------------------------------------------------------------
    async def has_domain(self, domain: str) -> bool:
        """Whether `domain` names a live preview (Caddy asks before a certificate)."""
        target = target_of(domain, "", self.routed_host())
        # Previews made only: any port of any E2B sandbox would let anyone who knows its
        # id have certificates ordered without end (the CA's limits are per domain).
        return target is not None and await self.find(target, implicit=False) is not None

    async def find(self, target: Target, implicit: bool = True) -> Preview | None:
        """The preview made for the target's port, or (`implicit`) the port's own address
        where the box has one (an E2B sandbox's)."""
        key = (target.box_id, target.port)
        preview = self._found.get(key) or await self._repo.find(*key)
        if preview is None or preview.expired():
            self._found.pop(key, None)
            # Not kept: a sandbox's port costs two lookups, and made-up ones grow nothing.
            return await self.hosts.find(*key) if self.hosts and implicit else None
        self._found[key] = preview
        return preview

    def traffic_ok(self, preview: Preview, token: str) -> bool:
        return bool(token) and self.hosts is not None and self.hosts.admits(preview, token)

    def activity_of(self, preview: Preview) -> AbstractContextManager[None]:
        """Held while a WebSocket to the box is open: the box is in use."""
        return self._activity.busy(preview.box_id)

    def secret_ok(self, preview: Preview, given: str) -> bool:
        return check_secret(self._key, preview.id, given)

    async def owner_may(self, preview: Preview, user: User | None) -> bool:
        """Whether a logged-in `user` may use a private preview: the box is theirs (or they
        are an owner)."""
        return user is not None and sees(user, preview.owner_id)

    async def connect(self, preview: Preview, wake: bool = True) -> socket.socket:
        """A connected socket to the preview's port on the box's loopback. A stopped box
        is started when `wake` (Waking is raised meanwhile)."""
        self._activity.touch(preview.box_id)
        cached = self._namespaces.get(preview.box_id)
        if cached is not None and not cached[1].closed:
            # The common case, with no lookup: a box that stopped or restarted since has an
            # empty namespace here, which refuses; then the box is looked at again.
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                return await self._connect_in(cached[1], preview.port)
        box = await self._boxes.get(preview.box_id)
        if box is None or box.desired == Desired.DELETED:
            raise NotFound("no such preview")
        if box.state != BoxState.RUNNING:
            if box.desired == Desired.STOPPED and wake:
                # A wake is an action for the box's owner: not when they may no longer run
                # it (a removed member's box starts again only when the owner says so).
                if (
                    box.owner_id
                    and self._owner_active
                    and not await self._owner_active(box.owner_id)
                ):
                    raise InvalidState(f"box {box.name}'s owner can no longer use it")
                self._wake(box)
            if box.desired == Desired.RUNNING or wake:
                raise Waking(f"box {box.name} is starting")
            raise InvalidState(f"box {box.name} is {box.state.value}")
        return await self._connect_in(await self._namespace(box), preview.port)

    async def _connect_in(self, ns: BoxNetworkHandle, port: int) -> socket.socket:
        spare = ns.spare()
        sock = spare if spare is not None else await anyio.to_thread.run_sync(ns.socket)
        try:
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), CONNECT_TIMEOUT)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _namespace(self, box: Box) -> BoxNetworkHandle:
        """The box's network namespace, opened once per container start and kept."""
        cid = box.container_id or ""
        # A resumed box's container has a new init, so a new namespace.
        started = f"{cid}@{box.started_at}"
        cached = self._namespaces.get(box.id)
        if cached is not None and cached[0] == started and not cached[1].closed:
            return cached[1]
        self.forget(box.id)
        try:
            ns = await self._rt.open_network(cid)
        except (InvalidState, NotFound):
            raise InvalidState(f"box {box.name} is not running") from None
        self._namespaces[box.id] = (started, ns)
        return ns

    def forget(self, box_id: str) -> None:
        """Drop the box's namespace handle (it stopped or went)."""
        cached = self._namespaces.pop(box_id, None)
        if cached is not None:
            cached[1].close()

    def _wake(self, box: Box) -> None:
        if box.id in self._waking:
            return

        async def resume() -> None:
            try:
                await self._boxes.resume(box.id)
            except PaddockError as exc:
                log.warning("preview: could not wake box %s: %s", box.name, exc.message)
            finally:
                self._waking.pop(box.id, None)

        self._waking[box.id] = asyncio.get_running_loop().create_task(resume())

    async def close(self) -> None:
        for task in list(self._waking.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        for box_id in list(self._namespaces):
            self.forget(box_id)

    async def drop_owner(self, owner_id: str) -> int:
        """End every preview of a user's boxes (they are being removed); how many."""
        gone = [p for p in await self._repo.all() if p.owner_id == owner_id]
        for preview in gone:
            await self._repo.delete(preview.id)
            self._found.pop((preview.box_id, preview.port), None)
        return len(gone)

    async def sweep(self) -> int:
        """Remove expired previews (their URLs already refuse) and those of boxes that are
        gone."""
        gone = await self._repo.delete_expired(time.time())
        self._found = {k: p for k, p in self._found.items() if not p.expired()}
        boxes = {b.id for b in await self._boxes.all()}
        for preview in await self._repo.all():
            if preview.box_id not in boxes:
                gone += await self._repo.delete(preview.id)
                self._found.pop((preview.box_id, preview.port), None)
                self.forget(preview.box_id)
        return gone
