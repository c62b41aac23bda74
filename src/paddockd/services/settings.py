"""The owner's settings, changed while the server runs (settings.py says which and how).
A change is checked with every other change over the file's values, kept in the store,
then handed to the services that read it (the composition root lists them)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .. import settings
from ..config import Config
from ..domain.errors import InvalidRequest
from ..settings import Kind, Source
from ..store.settings import SettingsRepository

log = logging.getLogger("paddockd.settings")


@dataclass(frozen=True)
class SettingView:
    key: str
    kind: Kind
    help: str
    value: Any
    file_value: Any  # paddockd.toml's (or the built-in default), what a reset returns to
    source: Source
    choices: tuple[str, ...]


class SettingsService:
    def __init__(self, repo: SettingsRepository, base: Config) -> None:
        self._repo = repo
        self._base = base
        self._stored = repo.load()
        self.current = settings.effective(base, self._stored)
        # Told the new configuration after each change (the composition root fills it).
        self.changed: list[Callable[[Config], None]] = []
        # The types boxes have (a type they have cannot be taken away).
        self.types_in_use: Callable[[], Awaitable[set[str]]] | None = None
        # Checks a change must pass that need the running server (what boxes may reach).
        self.checks: list[Callable[[Config], Awaitable[None]]] = []
        self._lock = asyncio.Lock()

    def list(self) -> list[SettingView]:
        return [self._view(s) for s in settings.all_settings(self.current)]

    def get(self, key: str) -> SettingView:
        return self._view(settings.setting(key))

    async def set(self, key: str, value: Any) -> SettingView:
        async with self._lock:
            s = settings.setting(key)
            cfg = settings.apply(self.current, s.key, value)
            for check in self.checks:
                await check(cfg)
            stored = {**self._stored, s.key: s.read(cfg)}
            await self._repo.put(s.key, stored[s.key])
            log.info("setting %s changed: %r (was %r)", s.key, stored[s.key], s.read(self.current))
            self._use(stored, cfg)
            return self._view(s)

    async def reset(self, key: str) -> SettingView:
        """Back to the file's value (or the default). Refused where another change rests on
        this one (a default type that is a type set here)."""
        async with self._lock:
            s = settings.setting(key)
            stored = {k: v for k, v in self._stored.items() if k != s.key}
            cfg = self._base
            for k, v in settings.in_order(stored):
                try:
                    cfg = settings.apply(cfg, k, v)
                except InvalidRequest as exc:
                    raise InvalidRequest(
                        f"{s.key} cannot be reset while {k} rests on it: {exc.message}"
                    ) from None
            gone = set(self.current.types) - set(cfg.types)
            used = gone & await self.types_in_use() if self.types_in_use and gone else set()
            if used:
                raise InvalidRequest(
                    f"boxes have type {', '.join(sorted(used))}: it stays while they do"
                )
            await self._repo.remove(s.key)
            log.info("setting %s reset: %r", s.key, s.read(cfg))
            self._use(stored, cfg)
            return self._view(s)

    def _use(self, stored: dict[str, Any], cfg: Config) -> None:
        self._stored = stored
        self.current = cfg
        for told in self.changed:
            told(cfg)

    def _view(self, s: settings.Setting) -> SettingView:
        return SettingView(
            s.key,
            s.kind,
            s.help,
            s.read(self.current),
            s.read(self._base),
            settings.source(s, self._base, self._stored, self.current),
            s.choices(self.current),
        )
