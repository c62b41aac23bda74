"""`paddock audit`: who did what on this server, newest first."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone

from ..wire.models import AuditEvent
from ._common import UsageError, call, examples, seconds_arg
from ._output import listing, since

_ago = seconds_arg("time")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "audit",
        help="who did what: changes and refused calls, newest first",
        description="The audit log: every call that changed something (on the API, the "
        "dashboard, the E2B API and its signed links) and every refused one (a wrong "
        "password, a missing or revoked token), with who made it (user, and which token: "
        "its first characters), from which address, what it named and how it ended. The "
        "owner sees everyone's; a member their own. Kept for `audit_days` (90 by default, "
        "docs/server.md). No body, query string or secret is ever recorded.",
        epilog=examples(
            "paddock audit",
            "paddock audit --since 1h",
            "paddock audit --user bob --box web --json",
            "paddock audit --user anonymous --since 2026-12-01T00:00:00Z",
        ),
        run=cmd_audit,
        json=True,
    )
    p.add_argument("--user", help="one user's calls (owner only; `anonymous`: refused ones)")
    p.add_argument("--box", metavar="BOX", help="calls that named this box (name or id)")
    p.add_argument("--since", metavar="WHEN", help="from then on: an age (90m, 2h, 1d) or a time")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N entries (1-1000)")


def cmd_audit(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit is 1 to 1000")
    events = call(args, lambda c: c.audit(args.user, args.box, _when(args.since), None, args.limit))
    return listing(
        events,
        args.json,
        ["WHEN", "ACTOR", "CREDENTIAL", "SOURCE", "ACTION", "TARGET", "STATUS"],
        _row,
        empty="nothing recorded (for these filters)",
    )


def _when(text: str | None) -> str | None:
    """An ISO time for the API: an age (`90m`) counts back from now."""
    if text is None:
        return None
    try:
        return (datetime.now(timezone.utc) - timedelta(seconds=_ago(text))).isoformat()
    except argparse.ArgumentTypeError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r}: use an age (90m, 2h, 1d) or an ISO time") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()


def _row(e: AuditEvent) -> list[str]:
    status = f"{e.status} {e.outcome}"
    return [since(e.at), e.actor, e.credential, e.source, e.action, e.target or "-", status]
