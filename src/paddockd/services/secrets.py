"""A user's own secrets, bound to hosts: set (the value is never shown again), list, remove,
attach to boxes and detach, and the log of their uses (and of provider keys') through the
credential gateway. Each user has their own, as with provider keys: a box only ever gets
placeholders for its owner's secrets."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.accounts import User, holder_of
from ..domain.box import Box
from ..domain.credentials import PlaceholderKind
from ..domain.errors import InvalidRequest, NotFound
from ..domain.secrets import SecretRule, check_header, check_hosts, check_name, check_value
from ..store.secrets import SecretRepository, Use
from .accounts import AccountService
from .boxes import BoxService
from .e2b.secrets import E2BSecrets
from .gateway import BoxEnvironment, GatewayService

MAX_LOG_LINES = 1000


@dataclass(frozen=True)
class SecretStatus:
    rule: SecretRule
    created_at: float
    last_used_at: float | None
    boxes: tuple[str, ...]  # the names of the boxes it is attached to


class SecretService:
    def __init__(
        self,
        repo: SecretRepository,
        boxes: BoxService,
        accounts: AccountService,
        gateway: GatewayService,
        environment: BoxEnvironment,
        e2b: E2BSecrets | None = None,
    ) -> None:
        self._repo = repo
        self._boxes = boxes
        self._accounts = accounts
        self._gateway = gateway
        self._environment = environment
        self._e2b = e2b

    async def set(
        self,
        name: str,
        value: str | None,
        hosts: list[str],
        header: str | None = None,
        fmt: str | None = None,
        caller: User | None = None,
    ) -> SecretStatus:
        """Store a secret, or change one (`value` None keeps its value: new hosts only)."""
        rule = SecretRule(check_name(name), check_hosts(hosts), *check_header(header, fmt))
        holder = holder_of(caller)
        if value is None and rule.name not in {s.rule.name for s in await self._repo.all(holder)}:
            raise InvalidRequest(f"a new secret needs its value (secret {rule.name} is not set)")
        await self._repo.put(holder, rule, check_value(value) if value is not None else None)
        await self._gateway.refresh()
        return await self.get(rule.name, caller)

    async def get(self, name: str, caller: User | None = None) -> SecretStatus:
        found = [s for s in await self.all(caller) if s.rule.name == name]
        if not found:
            raise NotFound(f"no secret named {name!r} (see `paddock secret ls`)")
        return found[0]

    async def all(self, caller: User | None = None) -> list[SecretStatus]:
        holder = holder_of(caller)
        attached = await self._repo.attachments()
        mine = [b for b in await self._boxes.all() if await self._holder(b) == holder]
        return [
            SecretStatus(
                s.rule,
                s.created_at,
                s.last_used_at,
                tuple(sorted(b.name for b in mine if s.rule.name in attached.get(b.id, ()))),
            )
            for s in await self._repo.all(holder)
        ]

    async def delete(self, name: str, caller: User | None = None) -> None:
        holder = holder_of(caller)
        if not await self._repo.delete(holder, await self._boxes_of(holder), name):
            raise NotFound(f"no secret named {name!r} (see `paddock secret ls`)")
        await self._gateway.refresh()

    async def forget(self, user_id: str) -> int:
        """Every secret of a removed member's."""
        gone = await self._repo.delete(user_id, await self._boxes_of(user_id), None)
        if self._e2b is not None:
            gone += await self._e2b.forget(user_id)
        await self._gateway.refresh()
        return gone

    async def _holder(self, box: Box) -> str | None:
        return (await self._accounts.holders()).of(box.owner_id)

    async def _boxes_of(self, holder: str | None) -> list[str]:
        return [b.id for b in await self._boxes.all() if await self._holder(b) == holder]

    async def attach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        """Give the box a placeholder for its owner's secret `name` (in `$name`)."""
        box = await self._boxes.resolve(ref, caller)
        await self._environment.attach_secrets(box, [name], await self._holder(box))
        return [r.name for r in self._gateway.attached_secrets(box.id)]

    async def detach(self, ref: str, name: str, caller: User | None = None) -> list[str]:
        box = await self._boxes.resolve(ref, caller)
        await self._repo.detach(box.id, name)
        await self._gateway.refresh()
        return [r.name for r in self._gateway.attached_secrets(box.id)]

    async def attached(self, ref: str, caller: User | None = None) -> list[str]:
        box = await self._boxes.resolve(ref, caller)
        return [r.name for r in self._gateway.attached_secrets(box.id)]

    async def uses(
        self,
        caller: User | None = None,
        kind: PlaceholderKind | None = None,
        name: str | None = None,
        box: str | None = None,
        limit: int = 100,
    ) -> list[Use]:
        """The caller's keys' and secrets' uses through the gateway, the newest first."""
        if not 1 <= limit <= MAX_LOG_LINES:
            raise InvalidRequest(f"limit is 1 to {MAX_LOG_LINES}")
        box_id = (await self._boxes.resolve(box, caller)).id if box else None
        return await self._repo.uses(holder_of(caller), kind, name, box_id, limit)
