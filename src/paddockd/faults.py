"""Crash points for the fault suite: `PADDOCKD_FAULT=<point>` makes paddockd kill itself
with SIGKILL the first time it reaches that point, so a test can crash it exactly between
two steps of an operation (see docs/faults.md for the points). Read once at import: unset,
`point()` is one comparison against None."""

from __future__ import annotations

import os
import signal

ARMED: str | None = os.environ.get("PADDOCKD_FAULT") or None


def point(name: str) -> None:
    if name == ARMED:
        # SIGKILL, not an exception: nothing may run after it (no finally, no shutdown
        # hook, no flush), as when the machine loses power or the OOM killer strikes.
        os.kill(os.getpid(), signal.SIGKILL)
