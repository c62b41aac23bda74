"""`paddock webhook add|ls|rm|test|log`: box events POSTed, signed, to a URL of yours."""

from __future__ import annotations

import argparse

from ..wire.models import Webhook, WebhookDelivery
from ._common import call, examples, nested
from ._output import emit_json, listing, note, since

EVENTS = (
    "box.created, box.started, box.stopped (with its reason: user, ttl, idle), box.deleted, "
    "box.error, snapshot.taken, run.finished, egress.refused"
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "webhook",
        help="be told of box events at a URL of yours (signed POSTs)",
        description="Paddock POSTs each event of your boxes (the server owner's: every "
        f"box's) as JSON to the webhook's URL: {EVENTS}. Each delivery is signed: the "
        "header Paddock-Signature: t=TIMESTAMP,v1=HEX, HEX being HMAC-SHA256 under the "
        "webhook's secret of 'TIMESTAMP.BODY'; check it, and that TIMESTAMP is within five "
        "minutes. A delivery the receiver does not answer with 2xx is tried again, up to 8 "
        "times over about an hour and a half; a box's events arrive in order. A member's webhook "
        "goes to public addresses only. docs/server.md 'Events and webhooks'.",
    )
    hook = nested(p)
    add = hook.add_parser(
        "add",
        help="add a webhook (prints its signing secret, once)",
        epilog=examples(
            "paddock webhook add http://127.0.0.1:9000/paddock",
            "paddock webhook add http://127.0.0.1:9000/ci --events box.stopped,box.error",
        ),
        run=cmd_add,
        json=True,
    )
    add.add_argument("hook_url", metavar="URL")
    add.add_argument(
        "--events", default="", metavar="TYPES", help="comma-separated event types (default: all)"
    )
    hook.add_parser("ls", help="your webhooks (the owner: everyone's)", run=cmd_ls, json=True)
    rm = hook.add_parser("rm", help="remove a webhook (its pending deliveries go too)", run=cmd_rm)
    rm.add_argument("id", metavar="ID")
    test = hook.add_parser(
        "test", help="send a webhook.test event now and show the answer", run=cmd_test, json=True
    )
    test.add_argument("id", metavar="ID")
    log = hook.add_parser(
        "log", help="a webhook's last deliveries, newest first", run=cmd_log, json=True
    )
    log.add_argument("id", metavar="ID")
    log.add_argument("-n", "--limit", type=int, default=50, metavar="N", help="at most N (1-200)")


def cmd_add(args: argparse.Namespace) -> int:
    events = [e.strip() for e in args.events.split(",") if e.strip()]
    made = call(args, lambda c: c.add_webhook(args.hook_url, events))
    if args.json:
        emit_json(made)
        return 0
    print(made.webhook.id)
    note(
        f"secret (shown once; deliveries are signed with it): {made.secret}\n"
        f"try it: paddock webhook test {made.webhook.id}"
    )
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    hooks = call(args, lambda c: c.list_webhooks())
    return listing(
        hooks,
        args.json,
        ["ID", "URL", "EVENTS", "BOXES", "ADDED"],
        _row,
        empty="no webhooks yet: `paddock webhook add URL`",
    )


def _row(h: Webhook) -> list[str]:
    return [h.id, h.url, ",".join(h.events) or "all", h.boxes, since(h.created_at)]


def cmd_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_webhook(args.id))
    note(f"webhook {args.id} removed")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    done = call(args, lambda c: c.test_webhook(args.id))
    if args.json:
        emit_json(done)
    elif done.delivered:
        print(f"delivered: the receiver answered {done.status}")
    else:
        why = f"it answered {done.status}" if done.status else done.error
        print(f"not delivered: {why}")
    return 0 if done.delivered else 1


def cmd_log(args: argparse.Namespace) -> int:
    found = call(args, lambda c: c.webhook_deliveries(args.id, args.limit))
    return listing(
        found,
        args.json,
        ["WHEN", "EVENT", "BOX", "STATE", "TRIES", "ANSWER"],
        _delivery,
        empty="nothing delivered yet",
    )


def _delivery(d: WebhookDelivery) -> list[str]:
    answer = str(d.status) if d.status is not None else (d.error or "-")
    return [since(d.created_at), d.event_type, d.box_id or "-", d.state, str(d.attempts), answer]
