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
        # Both sides at once: each is a process's start, on every box start.
        running = {
            side: subprocess.Popen(
                [path, "-D", side, address],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for side in ("--orig-src", "--orig-dst")
        }
        for side, proc in running.items():
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            # Exit status 1 means no entry matched: the common case.
            if proc.returncode not in (0, 1):
                log.warning("conntrack -D %s %s: %s", side, address, err.strip())
