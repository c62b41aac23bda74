"""Where the client keeps its server URL, token and `current` box (a small JSON file).

Plain os.path and no dataclass on purpose: this module is on every command's path.
"""

from __future__ import annotations

import json
import os
import sys

DEFAULT_URL = "http://127.0.0.1:7423"


def config_path() -> str:
    if explicit := os.environ.get("PADDOCK_CONFIG"):
        return explicit
    if sys.platform == "win32":
        base = os.environ.get("APPDATA", os.path.expanduser("~"))
    else:
        base = os.environ.get("XDG_CONFIG_HOME", os.path.join(os.path.expanduser("~"), ".config"))
    return os.path.join(base, "paddock", "config.json")


class ClientConfig:
    def __init__(
        self, url: str = DEFAULT_URL, token: str | None = None, current: str | None = None
    ) -> None:
        self.url = url
        self.token = token
        self.current = current

    @classmethod
    def load(cls, *, apply_env: bool = True) -> ClientConfig:
        data: dict[str, object] = {}
        try:
            with open(config_path(), encoding="utf-8") as f:
                loaded = json.load(f)
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        cfg = cls(
            url=str(data.get("url") or DEFAULT_URL),
            token=str(data["token"]) if data.get("token") else None,
            current=str(data["current"]) if data.get("current") else None,
        )
        if apply_env:
            # The environment wins over the file, so scripts and CI can point elsewhere.
            cfg.url = os.environ.get("PADDOCK_URL", cfg.url)
            cfg.token = os.environ.get("PADDOCK_TOKEN", cfg.token)
        return cfg

    def save(self) -> str:
        path = config_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        # The token is a credential: the file is private to its owner from the first byte.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"url": self.url, "token": self.token, "current": self.current}, f, indent=2)
        os.replace(tmp, path)
        return path
