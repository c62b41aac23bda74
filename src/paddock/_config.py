"""Where the client keeps its server URL, token and `current` box (a small JSON file)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:7423"


def config_path() -> Path:
    if explicit := os.environ.get("PADDOCK_CONFIG"):
        return Path(explicit)
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home()))
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return base / "paddock" / "config.json"


@dataclass
class ClientConfig:
    url: str = DEFAULT_URL
    token: str | None = None
    current: str | None = None

    @classmethod
    def load(cls, *, apply_env: bool = True) -> ClientConfig:
        path = config_path()
        data: dict[str, object] = {}
        if path.exists():
            try:
                loaded = json.loads(path.read_text())
                data = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                data = {}
        cfg = cls(
            url=str(data.get("url") or DEFAULT_URL),
            token=str(data["token"]) if data.get("token") else None,
            current=str(data["current"]) if data.get("current") else None,
        )
        if not apply_env:
            return cfg
        # The environment wins over the file, so scripts and CI can point elsewhere.
        cfg.url = os.environ.get("PADDOCK_URL", cfg.url)
        cfg.token = os.environ.get("PADDOCK_TOKEN", cfg.token)
        return cfg

    def save(self) -> Path:
        path = config_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        # The token is a credential: the file is private to its owner from the first byte.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=2)
        os.replace(tmp, path)
        return path
