"""The credential gateway's decisions (gateway/base.py `Grants`): which box is asking, whose
keys and secrets it may use, what its placeholders stand for, where the gateway may connect
on its behalf, and a line in the log for every use and every refusal. Also what a box's
commands find in their environment: placeholders and the gateway's URLs, never a key of
gateway mode.

A placeholder is good only from the box it was made for (the address a request comes from
is the box's own: the bridge guard drops anything else), for its own provider or for hosts
its secret is bound to, and only while the key is attached to the box or one of its runs
uses it."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from ..domain.accounts import Holders
from ..domain.box import Box, BoxState
from ..domain.credentials import PROVIDERS, PlaceholderKind, upstream_of
from ..domain.errors import NotFound
from ..domain.header_rules import HeaderRule, render
from ..domain.network import METADATA, Closed
from ..domain.secrets import SecretRule
from ..gateway.base import Asked, Denied, Grant
from ..gateway.substitute import Swap
from ..netpolicy.base import NetworkRules
from ..netpolicy.quotas import TokenBuckets
from ..runtime.base import Runtime
from ..store.credentials import CredentialRepository, Key
from ..store.secrets import Placeholder, SecretRepository, Use
from .accounts import AccountService
from .boxes import BoxService

log = logging.getLogger("paddockd.gateway")

CA_NAME = "paddock-gateway"
CA_FILE = f"/usr/local/share/ca-certificates/{CA_NAME}.crt"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# For the TLS clients that do not read the system's bundle by default.
CA_ENV = {
    "NODE_EXTRA_CA_CERTS": CA_FILE,
    "REQUESTS_CA_BUNDLE": SYSTEM_BUNDLE,
    "SSL_CERT_FILE": SYSTEM_BUNDLE,
    "PIP_CERT": SYSTEM_BUNDLE,
}
_CLOSED_FOR = 30.0  # seconds the host's closed ranges are reused
_CACHED_FOR = 3.0  # seconds owner accounts and keys are reused between requests
REFUSALS_PER_SECOND = 1.0  # refusals written per box (a burst of REFUSAL_BURST first)
REFUSAL_BURST = 20
MAX_PENDING = 10_000


class HeaderSecrets(Protocol):
    """Where headers set per host come from (E2B's network rules, services/e2b/secrets.py)
    and the values of the secrets they name."""

    async def header_rules(self) -> dict[str, tuple[HeaderRule, ...]]: ...

    async def values(self, holder: str | None, names: list[str]) -> dict[str, str]: ...


@dataclass(frozen=True)
class _Asker:
    box_id: str
    box_name: str
    holder: str | None


# Where the gateway never connects, whatever the owner opened: the host itself (0.0.0.0
# reaches its loopback too); the boxes' and builds' bridges are added by the wiring (other
# boxes, and the host's services on their gateway addresses).
NEVER = (
    Closed("0.0.0.0/8", "this host"),
    Closed("127.0.0.0/8", "this host's loopback"),
)


def closed_address(address: str, closed: list[Closed], opened: tuple[str, ...]) -> Closed | None:
    """The closed range `address` lies in, unless the owner opened it (cloud metadata and
    the host's own addresses: never)."""
    ip = ipaddress.IPv4Address(address)
    for c in closed:
        if ip not in ipaddress.IPv4Network(c.cidr, strict=False):
            continue
        if (
            c.cidr in METADATA
            or c.what.startswith("this host")
            or not any(ip in ipaddress.IPv4Network(o, strict=False) for o in opened)
        ):
            return c
    return None


class GatewayService:
    def __init__(
        self,
        network: NetworkRules,
        boxes: BoxService,
        accounts: AccountService,
        keys: CredentialRepository,
        secrets: SecretRepository,
        *,
        open_ranges: tuple[str, ...] = (),
        bridges: tuple[str, ...] = (),
        never: tuple[Closed, ...] = NEVER,
        headers: HeaderSecrets | None = None,
    ) -> None:
        """`bridges`: the boxes' and builds' subnets; with `never`, the ranges the gateway
        never connects to, whatever the owner opened."""
        self._never = [
            *never,
            *(Closed(str(ipaddress.ip_interface(b).network), "this host's boxes") for b in bridges),
        ]
        self._net = network
        self._boxes = boxes
        self._accounts = accounts
        self._keys = keys
        self._secrets = secrets
        self._open = open_ranges
        # (box id, provider) -> runs going in the box that use the provider's key.
        self._held: Counter[tuple[str, str]] = Counter()
        self._rules: dict[str, tuple[SecretRule, ...]] = {}  # box id -> attached secrets
        self._header_secrets = headers
        self._refreshing = asyncio.Lock()
        self._headers: dict[str, tuple[HeaderRule, ...]] = {}  # box id -> headers per host
        self._closed: tuple[float, list[Closed]] = (0.0, [])
        self._owners: tuple[float, Holders | None] = (0.0, None)
        # (holder, provider) -> (when read, the key): a key changed takes a moment to show.
        self._keys_seen: dict[tuple[str | None, str], tuple[float, Key | None]] = {}
        # Uses waiting to be written, by one writer; refusals held to a rate per box.
        self._pending: list[tuple[str | None, Use]] = []
        self._writer: asyncio.Task[None] | None = None
        self._refusals = TokenBuckets(REFUSALS_PER_SECOND, REFUSAL_BURST)
        self.dropped = 0  # use lines not written (a box refused faster than the rate)

    # -- what is attached ---------------------------------------------------------------
    async def refresh(self) -> None:
        """Reread which secrets are attached to which box (after any change to them): one
        at a time, so an older read never lands after a newer one."""
        async with self._refreshing:
            await self._refresh()

    async def _refresh(self) -> None:
        attached = await self._secrets.attachments()
        rules = await self._secrets.rules()
        holders = await self._accounts.holders()
        owners = {b.id: holders.of(b.owner_id) for b in await self._boxes.all()}
        self._rules = {
            box_id: tuple(
                rules[(owners[box_id] or "", name)]
                for name in names
                if (owners[box_id] or "", name) in rules
            )
            for box_id, names in attached.items()
            if box_id in owners
        }
        if self._header_secrets is not None:
            self._headers = await self._header_secrets.header_rules()

    def _header_rule(self, box_id: str, host: str) -> HeaderRule | None:
        return next(
            (r for r in self._headers.get(box_id, ()) if r.pattern_for(host) is not None), None
        )

    def attached_secrets(self, box_id: str) -> tuple[SecretRule, ...]:
        return self._rules.get(box_id, ())

    def hold(self, box_id: str, providers: list[str]) -> None:
        """A run in the box uses these providers' keys until `release`."""
        self._held.update((box_id, p) for p in providers)

    def release(self, box_id: str, providers: list[str]) -> None:
        self._held.subtract((box_id, p) for p in providers)
        self._held = +self._held

    # -- Grants -------------------------------------------------------------------------
    def is_box(self, ip: str) -> bool:
        return self._net.box_at(ip) is not None

    def egress(self, box_ip: str) -> bool:
        box = self._net.box_at(box_ip)
        return box is not None and box.policy.mode != "deny-all"

    def binding(self, box_ip: str, host: str) -> str | None:
        box = self._net.box_at(box_ip)
        if box is None or box.policy.mode == "deny-all" or not box.policy.allows_name(host):
            return None
        rules: list[SecretRule | HeaderRule] = [
            *self._rules.get(box.box_id, ()),
            *self._headers.get(box.box_id, ()),
        ]
        return next((p for r in rules if (p := r.pattern_for(host)) is not None), None)

    def sets_headers(self, box_id: str) -> bool:
        return bool(self._headers.get(box_id))

    def binds(self, box_id: str, host: str) -> bool:
        return any(rule.binds(host) for rule in self._rules.get(box_id, ())) or (
            self._header_rule(box_id, host) is not None
        )

    async def _asked_by(
        self, asked: Asked
    ) -> tuple[_Asker, list[Placeholder], frozenset[str]] | None:
        """Who asks (the box at the request's address), its placeholders' rows and the
        providers attached to it: one read of the store."""
        address = self._net.box_at(asked.box_ip)
        if address is None:
            return None
        facts = await self._secrets.facts(address.box_id, [v.decode() for v in asked.placeholders])
        if facts is None:
            return None
        holder = (await self._holders()).of(facts.owner_id)
        return _Asker(address.box_id, facts.box_name, holder), facts.found, facts.attached

    async def _holders(self) -> Holders:
        at, holders = self._owners
        if holders is None or time.monotonic() - at > _CACHED_FOR:
            holders = await self._accounts.holders()
            self._owners = (time.monotonic(), holders)
        return holders

    def forget_keys(self) -> None:
        """A key was set or removed: read keys afresh."""
        self._keys_seen.clear()

    async def _key(self, holder: str | None, provider: str) -> Key | None:
        """The holder's key, kept a few seconds (decrypted once, not at every request)."""
        at, keys = self._keys_seen.get((holder, provider), (0.0, None))
        if time.monotonic() - at > _CACHED_FOR:
            keys = (await self._keys.keys(holder, [provider], used=False)).get(provider)
            self._keys_seen[(holder, provider)] = (time.monotonic(), keys)
        return keys

    async def for_provider(self, asked: Asked, provider: str) -> Grant | Denied:
        seen = await self._asked_by(asked)
        if seen is None:
            return Denied(403, "forbidden", "not a box of this server")
        who, found, attached = seen
        p = PROVIDERS.get(provider)
        if p is None:
            known = ", ".join(f"/{name}" for name in PROVIDERS)
            return Denied(404, "not_found", f"no provider {provider!r} at the gateway ({known})")
        host = p.name
        mine = [f for f in found if (f.box_id, f.kind, f.name) == (who.box_id, "provider", p.name)]
        for other in (f for f in found if f not in mine):
            self._note(who, "provider", p.name, host, asked, 403, _why_not(other, who, p.name))
        if len(mine) != len(found) or not mine:
            why = (
                "a placeholder in this request is not this box's for "
                f"{p.name}: refused (and logged)"
                if found
                else f"no Paddock placeholder in the request: send the {p.key_env} this "
                "box was given"
            )
            if not found:
                self._note(who, "provider", p.name, host, asked, 401, "no placeholder")
            return Denied(403 if found else 401, "placeholder_refused", why)
        if p.name not in attached and self._held[(who.box_id, p.name)] <= 0:
            self._note(who, "provider", p.name, host, asked, 403, "not attached")
            return Denied(
                403,
                "not_attached",
                f"{p.name}'s key is not attached to box {who.box_name} "
                f"(`paddock auth attach {who.box_name} {p.name}`)",
            )
        key = await self._key(who.holder, p.name)
        if key is None or key.mode != "gateway":
            why = "is not set" if key is None else "is set with --mode env (the box holds it)"
            self._note(who, "provider", p.name, host, asked, 403, f"key {why}")
            return Denied(403, "no_key", f"{p.name}'s key {why}")
        upstream = upstream_of(p, key.base_url)
        swaps = {mine[0].value.encode(): Swap(key.secret.encode())}

        def record(status: int) -> None:
            self._note(who, "provider", p.name, host, asked, status, None)

        return Grant(swaps, upstream, record)

    async def for_host(self, asked: Asked, host: str) -> Grant | Denied:
        address = self._net.box_at(asked.box_ip)
        if address is None:
            return Denied(403, "forbidden", "no box")
        header_rule = self._header_rule(address.box_id, host)
        if not asked.placeholders and header_rule is None:
            return Grant()
        seen = await self._asked_by(asked)
        if seen is None:
            return Denied(403, "forbidden", "not a box of this server")
        who, found, _ = seen
        rules = {r.name: r for r in self._rules.get(who.box_id, ()) if r.binds(host)}
        usable = [
            f for f in found if f.box_id == who.box_id and f.kind == "secret" and f.name in rules
        ]
        for other in (f for f in found if f not in usable):
            # Left as it is in the request: the host sees the placeholder, never a value.
            reason = _why_not(other, who, None) or f"not bound to {host}"
            self._note(who, other.kind, other.name, host, asked, 0, reason)
        values = await self._secrets.values(who.holder, [f.name for f in usable])
        swaps = {}
        for f in usable:
            if f.name not in values:
                continue
            rule, value = rules[f.name], values[f.name]
            header = rule.header.lower().encode() if rule.header else None
            swaps[f.value.encode()] = Swap(
                value.encode(), header, rule.header_value(value).encode()
            )
        names = sorted({f.name for f in usable if f.name in values})
        headers = await self._set_headers(who, asked, host, header_rule)
        if isinstance(headers, Denied):
            return headers
        set_headers, masked, named = headers

        def record(status: int) -> None:
            for name in [*names, *named]:
                self._note(who, "secret", name, host, asked, status, None)

        return Grant(swaps, None, record, set_headers, masked)

    async def _set_headers(
        self, who: _Asker, asked: Asked, host: str, rule: HeaderRule | None
    ) -> tuple[tuple[tuple[bytes, bytes], ...], tuple[bytes, ...], list[str]] | Denied:
        """The headers a sandbox's network rule sets for `host`, with its owner's secrets'
        current values; the values (to mask); the secrets used, as the log names them."""
        if rule is None or self._header_secrets is None:
            return (), (), []
        wanted = sorted(rule.secrets())
        values = await self._header_secrets.values(who.holder, wanted) if wanted else {}
        missing = [n for n in wanted if n not in values]
        if missing:
            for name in missing:
                self._note(who, "secret", f"e2b:{name}", host, asked, 403, "no such secret")
            return Denied(
                403,
                "secret_missing",
                f"this sandbox's network rule for {rule.host} names secrets that do not "
                f"exist: {', '.join(missing)}",
            )
        out = []
        for name, template in rule.headers:
            value = render(template, values)
            assert value is not None  # every secret it names was found above
            out.append((name.encode(), value.encode()))
        masked = tuple(values[n].encode() for n in wanted)
        return tuple(out), masked, [f"e2b:{n}" for n in wanted]

    async def address_of(self, host: str, port: int) -> str | Denied:
        try:
            addresses = [str(ipaddress.IPv4Address(host))]
        except ValueError:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, family=socket.AF_INET, type=socket.SOCK_STREAM
                )
            except OSError as exc:
                return Denied(502, "gateway_upstream", f"could not resolve {host} ({exc})")
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        closed = [*self._never, *await self._closed_ranges()]
        shut: Closed | None = None
        for address in addresses:
            shut = closed_address(address, closed, self._open)
            if shut is None:
                return address
        assert shut is not None
        return Denied(
            403,
            "closed_range",
            f"{host} is in {shut.cidr}, {shut.what}: the gateway does not connect there",
        )

    async def _closed_ranges(self) -> list[Closed]:
        at, ranges = self._closed
        if time.monotonic() - at > _CLOSED_FOR or not ranges:
            ranges = await self._net.closed()
            self._closed = (time.monotonic(), ranges)
        return ranges

    # -- the log ------------------------------------------------------------------------
    def _note(
        self,
        who: _Asker,
        kind: PlaceholderKind,
        name: str,
        host: str,
        asked: Asked,
        status: int,
        refused: str | None,
    ) -> None:
        use = Use(
            who.box_id,
            who.box_name,
            kind,
            name,
            host[:255],
            asked.method[:16],
            asked.path,
            status,
            "refused" if refused else "used",
            refused,
            time.time(),
        )
        if refused is not None and not self._refusals.take(who.box_id):
            self.dropped += 1  # a box refused over and over is counted, not written each time
            return
        if refused is not None:
            log.warning(
                "gateway: box %s: %s %s for %s refused: %s",
                who.box_name,
                kind,
                name,
                host,
                refused,
            )
        if len(self._pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.append((who.holder, use))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        """Every use noted meanwhile, in one transaction at a time, off the request's path."""
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._secrets.record(batch)
            except Exception:
                log.exception("gateway: %d uses could not be recorded", len(batch))

    async def drain(self) -> None:
        while self._writer is not None and not self._writer.done():
            await self._writer


def _why_not(found: Placeholder, who: _Asker, provider: str | None) -> str:
    if found.box_id != who.box_id:
        return "another box's placeholder"
    if provider is not None and (found.kind, found.name) != ("provider", provider):
        return f"the placeholder of {found.kind} {found.name}"
    return ""


class BoxEnvironment:
    """What a box's commands get in their environment from keys and secrets: attached
    providers' placeholders and gateway URLs (or, for keys of env mode, the keys), and
    attached secrets' placeholders, with the gateway's CA trusted in the box."""

    def __init__(
        self,
        credentials: Any,  # services/credentials.py CredentialService (its env_for_box)
        gateway: GatewayService,
        secrets: SecretRepository,
        runtime: Runtime,
        ca_pem: bytes,
    ) -> None:
        self._credentials = credentials
        self._gateway = gateway
        self._secrets = secrets
        self._rt = runtime
        self._pem = ca_pem
        self._trusted: set[str] = set()  # containers whose trust store has the CA

    async def env_for_box(self, box: Box) -> dict[str, str]:
        env: dict[str, str] = await self._credentials.env_for_box(box)
        rules = self._gateway.attached_secrets(box.id)
        for rule in rules:
            env[rule.name] = await self._secrets.placeholder(box.id, "secret", rule.name)
        if rules or self._gateway.sets_headers(box.id):
            env.update(CA_ENV)
            await self.trust(box)
        return env

    async def rules_changed(self, box: Box) -> None:
        """A sandbox's headers set per host changed: the gateway rereads them, and the box
        trusts the gateway's CA (its TLS for those hosts is the gateway's)."""
        await self._gateway.refresh()
        if self._gateway.sets_headers(box.id) and box.state == BoxState.RUNNING:
            await self.trust(box)

    async def check_secrets(self, holder: str | None, names: list[str]) -> None:
        """Refuse names `holder` has no secret of (before a box is made with them)."""
        have = {s.rule.name for s in await self._secrets.all(holder)}
        for name in names:
            if name not in have:
                raise NotFound(
                    f"no secret named {name!r}: set it first (`paddock secret set {name} "
                    "--host HOST`)"
                )

    async def attach_secrets(self, box: Box, names: list[str], holder: str | None) -> None:
        """Attach these secrets of the box owner's (`holder`) to the box."""
        await self.check_secrets(holder, names)
        for name in names:
            await self._secrets.attach(box.id, name)
        await self._gateway.refresh()
        if box.container_id is not None and box.state == BoxState.RUNNING:
            await self.trust(box)

    async def trust(self, box: Box) -> None:
        """The gateway's CA in the box's trust stores, once per container."""
        cid = box.container_id
        if cid is None or cid in self._trusted:
            return
        await self._rt.trust(cid, CA_NAME, self._pem)
        self._trusted.add(cid)
