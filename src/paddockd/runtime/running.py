"""The engine's running box containers as paddockd last saw them, so a network sync after
each create or start does not list every container (the engine's listing grows with its
containers: ~55 ms at 200).

paddockd starts every box container itself, and inspects each one it started before the
sync that follows: what it starts, stops, removes and inspects keeps the view current, and
a full listing at least every `every` seconds catches the rest (a box whose init exited on
its own). Only the first listing is waited for; later ones are taken behind the sync that
found them due (runtime/docker.py) and serve the next. A container seen stopped late is
harmless to the rules: the bridge binds each address to its box's port and MAC, and that
port went with the container. An address the engine gives again belongs to the container
seen with it last, never to two boxes.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import ContainerInfo


class RunningContainers:
    """Not thread-safe: used from the event loop only."""

    def __init__(self, every: float) -> None:
        self._every = every
        self._by_id: dict[str, ContainerInfo] = {}
        self._due = 0.0  # when the next full listing is
        self._unseen: set[str] = set()  # started since, not inspected yet
        self._touched: set[str] | None = None  # changed while a listing is under way

    def seen(self, info: ContainerInfo) -> None:
        """What an inspect (or a listing) says of a container now."""
        self._touch(info.id)
        self._unseen.discard(info.id)
        if not info.running:
            self._by_id.pop(info.id, None)
            return
        self._drop_address(info)
        self._by_id[info.id] = info

    def started(self, cid: str) -> None:
        """paddockd started it: its address is known once it is inspected."""
        self._touch(cid)
        self._unseen.add(cid)

    def gone(self, cid: str) -> None:
        """Stopped or removed by paddockd."""
        self._touch(cid)
        self._unseen.discard(cid)
        self._by_id.pop(cid, None)

    def unseen(self) -> list[str]:
        return sorted(self._unseen)

    def listing_due(self, now: float) -> bool:
        return now >= self._due

    def never_listed(self) -> bool:
        """No listing has succeeded yet: nothing is known of what ran before paddockd."""
        return self._due == 0.0

    def listing(self) -> None:
        """A full listing is being taken: what changes meanwhile outranks it."""
        self._touched = set()

    def listing_failed(self) -> None:
        self._touched = None

    def listed(self, infos: Iterable[ContainerInfo], now: float) -> None:
        """The engine's running containers, as that listing found them."""
        touched, self._touched = self._touched or set(), None
        fresh = {i.id: i for i in infos if i.running and i.id not in touched}
        for cid in touched:
            if cid in self._by_id:
                fresh[cid] = self._by_id[cid]
        self._by_id = {}
        for info in fresh.values():
            self._drop_address(info)
            self._by_id[info.id] = info
        self._unseen -= set(fresh) - touched
        self._due = now + self._every

    def matching(self, labels: dict[str, str]) -> list[ContainerInfo]:
        return [
            info
            for info in self._by_id.values()
            if all(info.labels.get(k) == v for k, v in labels.items())
        ]

    def _touch(self, cid: str) -> None:
        if self._touched is not None:
            self._touched.add(cid)

    def _drop_address(self, info: ContainerInfo) -> None:
        if info.ip:
            for cid in [c for c, i in self._by_id.items() if i.ip == info.ip and c != info.id]:
                del self._by_id[cid]
