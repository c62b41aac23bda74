"""The settings the server's owner may change while the server runs (`paddock settings`,
the dashboard's Server page, /v1/settings). Each is a key of paddockd.toml's, and a change
is kept in the store, over the file's value, until it is reset: the file stays what the
owner wrote, and the store what was changed since. A change is refused as the file's own
value would be (config.check), and applies at once to what starts from then on; running
boxes keep what they were made with."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from . import config
from .config import Config
from .domain.box import BoxType, TtlAction, validate_idle_stop, validate_ttl
from .domain.errors import InvalidRequest, NotFound, PaddockError
from .domain.network import MODES

Kind = Literal["duration", "number", "integer", "text", "choice", "list", "sizes", "type"]
Source = Literal["default", "file", "set"]

log = logging.getLogger("paddockd.settings")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TYPE_FIELDS = {"cpus": float, "memory_mb": int, "pids": int, "disk_mb": int, "description": str}
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
MAX_VALUE_CHARS = 4096
# What a box type's limits may be: the engine's own bounds, and none that means "no limit"
# (a CPU cap below a hundredth is none to the engine).
_TYPE_BOUNDS = {
    "cpus": (0.01, 1024.0),
    "memory_mb": (64, 4 << 20),
    "pids": (64, 4 << 20),
    "disk_mb": (0, 64 << 20),
}


@dataclass(frozen=True)
class Setting:
    key: str
    kind: Kind
    help: str
    read: Callable[[Config], Any]
    write: Callable[[Config, Any], Config]
    choices: Callable[[Config], tuple[str, ...]] = lambda _: ()


def _network(cfg: Config, mode: str, allow: tuple[str, ...]) -> Config:
    """The default policy is one: the mode and its allowlist change together."""
    if mode == "allowlist" and not allow:
        raise InvalidRequest(
            "an allowlist needs entries: set network.default_allow (it sets the mode too)"
        )
    return replace(cfg, network=replace(cfg.network, default_mode=mode, default_allow=allow))


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "server.public_url",
        "text",
        "The address people use (links in invitations, previews, setup); empty: found "
        "from the front door, else http://127.0.0.1:PORT.",
        lambda c: c.public_url,
        lambda c, v: replace(c, public_url=v),
    ),
    Setting(
        "boxes.default_type",
        "choice",
        "The type of a box made without --type.",
        lambda c: c.default_type,
        lambda c, v: replace(c, default_type=v),
        lambda c: tuple(c.types),
    ),
    Setting(
        "boxes.default_ttl",
        "duration",
        "How long a box made without --ttl runs (0: no limit).",
        lambda c: c.default_ttl,
        lambda c, v: replace(c, default_ttl=validate_ttl(v)),
    ),
    Setting(
        "boxes.ttl_action",
        "choice",
        "What a box's TTL does when it runs out: stop it (files kept) or delete it.",
        lambda c: c.ttl_action.value,
        lambda c, v: replace(c, ttl_action=TtlAction(v)),
        lambda _: tuple(a.value for a in TtlAction),
    ),
    Setting(
        "boxes.idle_stop",
        "duration",
        "A box made without --idle-stop stops after this long unused (0: never).",
        lambda c: c.idle_stop,
        lambda c, v: replace(c, idle_stop=validate_idle_stop(v, c.idle_stop_min)),
    ),
    Setting(
        "network.default_mode",
        "choice",
        "The egress policy of a box made without one (allowlist: set default_allow, which "
        "sets this too; allow-all and deny-all clear the allowlist).",
        lambda c: c.network.default_mode,
        lambda c, v: _network(c, v, () if v != "allowlist" else c.network.default_allow),
        lambda _: tuple(MODES),
    ),
    Setting(
        "network.default_allow",
        "list",
        "The default policy's allowlist (domains, IPs, ranges): a list makes the default "
        "mode allowlist.",
        lambda c: list(c.network.default_allow),
        lambda c, v: _network(c, "allowlist" if v else c.network.default_mode, tuple(v)),
    ),
    Setting(
        "capacity.memory_overcommit",
        "number",
        "What running boxes' memory claims may add up to, in times the host's memory after "
        "the reserve.",
        lambda c: c.memory_overcommit,
        lambda c, v: replace(c, memory_overcommit=v),
    ),
    Setting(
        "capacity.memory_reserve_mb",
        "integer",
        "Host memory (MiB) kept for the host: a box starts only while this much is free.",
        lambda c: c.memory_reserve_mb,
        lambda c, v: replace(c, memory_reserve_mb=v),
    ),
    Setting(
        "capacity.cpu_overcommit",
        "number",
        "Count CPUs too: running boxes' CPUs may add up to this many times the host's "
        "cores (0: shared by weight, not counted).",
        lambda c: c.cpu_overcommit,
        lambda c, v: replace(c, cpu_overcommit=v),
    ),
    Setting(
        "pool.max_boxes",
        "integer",
        "Ready boxes the warm pool keeps in all (0: no pool).",
        lambda c: c.pool.max_boxes,
        lambda c, v: replace(c, pool=replace(c.pool, max_boxes=v)),
    ),
    Setting(
        "pool.types",
        "sizes",
        "Ready boxes kept per type, e.g. small=2,medium=1.",
        lambda c: dict(c.pool_sizes if c.pool.types is None else c.pool.types),
        lambda c, v: replace(c, pool=replace(c.pool, types=dict(v))),
    ),
)
BY_KEY = {s.key: s for s in SETTINGS}


def _type_setting(name: str) -> Setting:
    return Setting(
        f"types.{name}",
        "type",
        f"Box type {name}: cpus, memory_mb, disk_mb, pids, description. Running boxes keep "
        "their limits until they restart.",
        lambda c: _type_value(c.types[name]) if name in c.types else None,
        lambda c, v: replace(c, types={**c.types, name: _merged(c, name, v)}),
    )


def _merged(cfg: Config, name: str, given: dict[str, Any]) -> BoxType:
    """A type as given over what it was (a field left out keeps its value); a new type
    needs cpus, memory_mb and pids."""
    was = _type_value(cfg.types[name]) if name in cfg.types else {}
    spec = {**was, **given}
    missing = {"cpus", "memory_mb", "pids"} - set(spec)
    if missing:
        raise InvalidRequest(f"types.{name}: a new type needs {', '.join(sorted(missing))}")
    return BoxType(name=name, **spec)


def _type_value(t: BoxType) -> dict[str, Any]:
    return {k: getattr(t, k) for k in _TYPE_FIELDS}


def setting(key: str) -> Setting:
    found = BY_KEY.get(key)
    if found is not None:
        return found
    name = key.removeprefix("types.")
    if key.startswith("types.") and _TYPE_NAME.match(name):
        return _type_setting(name)
    raise NotFound(f"no setting {key!r}: `paddock settings` lists them")


def all_settings(cfg: Config) -> list[Setting]:
    return [*SETTINGS, *(_type_setting(name) for name in cfg.types)]


# -- values: JSON's, or the text a command line gives ---------------------------------------
def coerce(s: Setting, value: Any, cfg: Config) -> Any:
    """The value `s` takes from `value` (JSON, or text as typed on a command line)."""
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        raise InvalidRequest(f"{s.key}: the value is longer than {MAX_VALUE_CHARS} characters")
    try:
        got = _COERCE[s.kind](value)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise InvalidRequest(f"{s.key}: {exc}") from None
    allowed = s.choices(cfg)
    if allowed and got not in allowed:
        raise InvalidRequest(f"{s.key}: {got!r} is not one of {', '.join(allowed)}")
    return got


def _duration(value: Any) -> int:
    if isinstance(value, str):
        text = value.strip()
        unit = _UNITS.get(text[-1:], 0)
        number = text[:-1] if unit else text
        if not number.isdigit():
            raise ValueError(f"{value!r} is not a duration: seconds, or e.g. 90m, 2h, 1d")
        return int(number) * (unit or 1)
    return _integer(value)


def _integer(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a whole number >= 0")
    return value


def _number(value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{value!r} is not a number >= 0")
    if not math.isfinite(value) or value > 1e12:
        raise ValueError(f"{value!r} is not a number this setting can take")
    return float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.isprintable():
        raise ValueError("give a line of printable text")
    return value.strip()


def _list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [] if not value.strip() else [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("give a list of names, e.g. pypi.org,github.com")
    return value


def _sizes(value: Any) -> dict[str, int]:
    if isinstance(value, str):
        pairs = [p.partition("=") for p in value.split(",") if p.strip()]
        if any(not eq for _, eq, _ in pairs):
            raise ValueError(f"{value!r}: give TYPE=N pairs, e.g. small=2,medium=1")
        value = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, Mapping):
        raise ValueError("give TYPE=N pairs, e.g. small=2,medium=1")
    return {str(k): _integer(v) for k, v in value.items()}


def _box_type(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(
                'give the type as JSON, e.g. {"cpus": 2, "memory_mb": 4096, "pids": 4096}'
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError("give the type's cpus, memory_mb and pids (disk_mb, description)")
    unknown = set(value) - set(_TYPE_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    spec: dict[str, Any] = {}
    for key, raw in value.items():
        try:
            spec[key] = _text(raw) if key == "description" else _number(raw)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
        if _TYPE_FIELDS[key] is int:
            spec[key] = int(spec[key])
    for key, (low, high) in _TYPE_BOUNDS.items():
        if key in spec and not low <= spec[key] <= high:
            raise ValueError(f"{key} is {low:g} to {high:g}, not {spec[key]:g}")
    return spec


_COERCE: dict[str, Callable[[Any], Any]] = {
    "duration": _duration,
    "integer": _integer,
    "number": _number,
    "text": _text,
    "choice": _text,
    "list": _list,
    "sizes": _sizes,
    "type": _box_type,
}


def effective(base: Config, stored: Mapping[str, Any]) -> Config:
    """`base` (the file's) with the stored changes over it, each checked as it would be
    set. A stored value the server can no longer take (a type removed from the file) is
    left out, so the server starts: it shows as not set."""
    cfg, left = base, in_order(stored)
    while left:  # a change may rest on another (a default type that is a type set here)
        waiting = []
        for key, value in left:
            try:
                cfg = apply(cfg, key, value)
            except PaddockError:
                waiting.append((key, value))
        if len(waiting) == len(left):
            for key, _ in waiting:
                log.warning("setting %s is left out: the file no longer allows it", key)
            break
        left = waiting
    return cfg


def in_order(stored: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Types first: the other settings name them."""
    return sorted(stored.items(), key=lambda kv: (not kv[0].startswith("types."), kv[0]))


def apply(cfg: Config, key: str, value: Any) -> Config:
    """`cfg` with one setting changed, checked as a whole (InvalidRequest if refused)."""
    s = setting(key)
    changed = s.write(cfg, coerce(s, value, cfg))
    try:
        config.check(changed)
    except ValueError as exc:
        raise InvalidRequest(f"{s.key}: {exc}") from None
    return changed


def source(s: Setting, base: Config, stored: Mapping[str, Any], current: Config) -> Source:
    """Where the value now comes from: a stored change the file no longer allows (left
    out at start) is not where it comes from."""
    if s.key in stored and s.read(current) == stored[s.key]:
        return "set"
    return "default" if s.read(base) == s.read(_DEFAULTS) else "file"


_DEFAULTS = Config()
