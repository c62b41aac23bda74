"""Forgets what the kernel's connection tracking holds for an address a box has just
been given. An entry left by the address's previous box (in SYN-SENT, say) matches the
new box's connection to the same destination and port and holds it there until the
entry times out."""

from __future__ import annotations

import logging
import shutil
import subprocess

log = logging.getLogger("paddockd.network")


class Conntrack:
    def __init__(self, tool: str = "conntrack") -> None:
        self._tool = tool
        self._missing_told = False

    def forget(self, address: str) -> None:
        """Delete every entry from or to `address` (blocking: call it on a thread)."""
        path = shutil.which(self._tool)
        if path is None:
            if not self._missing_told:
                log.warning(
                    "%s is not installed: a box reusing an address may find connections "
                    "stuck until the old entries time out (install the conntrack package)",
                    self._tool,
                )
                self._missing_told = True
            return
        for side in ("--orig-src", "--orig-dst"):
            # Exit status 1 means no entry matched: the common case.
            done = subprocess.run(
                [path, "-D", side, address], capture_output=True, text=True, timeout=10
            )
            if done.returncode not in (0, 1):
                log.warning("conntrack -D %s %s: %s", side, address, done.stderr.strip())
