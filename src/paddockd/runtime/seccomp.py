"""The seccomp profile of `userns` boxes, derived from containers-common's default.

Why not Docker's built-in default: it answers the key calls with EPERM, and the runc of
Docker inside a box then fails to start any container ("unable to join session
keyring"); runc goes on without a keyring when the kernel answers ENOSYS, as for a kernel
without keys. So the key calls (`keyctl`, `add_key`, `request_key`) are answered ENOSYS:
a box has no use for the kernel's keyrings, and their quota is kept per host uid, where
a box that held keyrings could once stop every exec on the server (`docs/security.md`).
On top we allow sethostname, setdomainname, setns and chroot unconditionally (the base
ties them to capabilities): the box's own Docker needs them, and in a user namespace they
reach only the box's own namespaces. The base file comes from Debian's
golang-github-containers-common package (./install.sh extracts it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_BASE = Path("/var/lib/paddock/seccomp/containers-common.json")
ALWAYS_ALLOWED = ["sethostname", "setdomainname", "setns", "chroot"]
NO_KEYS = ["keyctl", "add_key", "request_key"]
ENOSYS = 38


def derive(base: dict[str, Any]) -> dict[str, Any]:
    profile = dict(base)
    rules = []
    for rule in base.get("syscalls", []):
        names = [n for n in rule.get("names", []) if n not in ALWAYS_ALLOWED + NO_KEYS]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": ALWAYS_ALLOWED, "action": "SCMP_ACT_ALLOW", "args": []})
    rules.append({"names": NO_KEYS, "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS, "args": []})
    profile["syscalls"] = rules
    return profile


def load(base_path: Path = DEFAULT_BASE) -> str | None:
    """The profile as the JSON text the engine API takes, or None if the base is missing."""
    try:
        base = json.loads(base_path.read_text())
    except (OSError, ValueError):
        return None
    return json.dumps(derive(base), separators=(",", ":"))
