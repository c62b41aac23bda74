"""/v1/webhooks: where the caller's box events are POSTed, signed (services/webhooks.py).
A member's webhooks get their own boxes' events; the owner's, every box's."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Query

from paddock.wire.models import (
    NewWebhook,
    Webhook,
    WebhookDeliveries,
    WebhookDelivery,
    WebhookList,
    WebhookRequest,
    WebhookTest,
)

from ...domain import webhooks as domain
from ...store.webhooks import PENDING, Delivery
from ..deps import Caller, Svc

router = APIRouter(tags=["webhooks"])


def _time(at: float) -> datetime:
    return datetime.fromtimestamp(at, timezone.utc)


def present(hook: domain.Webhook) -> Webhook:
    return Webhook(
        id=hook.id,
        url=hook.url,
        events=list(hook.events),
        boxes="all" if hook.owner_id is None else "own",
        created_at=_time(hook.created_at),
    )


def _delivery(d: Delivery) -> WebhookDelivery:
    return WebhookDelivery(
        id=d.id,
        event_id=d.event_id,
        event_type=d.event_type,
        box_id=d.box_id,
        created_at=_time(d.created_at),
        state=d.state,  # type: ignore[arg-type]  # the store writes only these three
        attempts=d.attempts,
        next_at=_time(d.next_at) if d.state == PENDING else None,
        status=d.status,
        error=d.error,
    )


@router.post(
    "/webhooks",
    status_code=201,
    response_model=NewWebhook,
    summary="Add a webhook: your box events POSTed, signed, to a URL (its secret shown once)",
)
async def add_webhook(body: WebhookRequest, svc: Svc, caller: Caller) -> NewWebhook:
    hook, secret = await svc.webhooks.add(caller, body.url, body.events)
    return NewWebhook(webhook=present(hook), secret=secret)


@router.get("/webhooks", response_model=WebhookList, summary="Your webhooks")
async def list_webhooks(svc: Svc, caller: Caller) -> WebhookList:
    return WebhookList(webhooks=[present(h) for h in await svc.webhooks.listed(caller)])


@router.delete("/webhooks/{hook_id}", status_code=204, summary="Remove a webhook")
async def delete_webhook(hook_id: str, svc: Svc, caller: Caller) -> None:
    await svc.webhooks.remove(hook_id, caller)


@router.post(
    "/webhooks/{hook_id}/test",
    response_model=WebhookTest,
    summary="Send a webhook.test event at once, tried once: what the receiver answered",
)
async def test_webhook(hook_id: str, svc: Svc, caller: Caller) -> WebhookTest:
    done = await svc.webhooks.test(hook_id, caller)
    return WebhookTest(delivered=done.delivered, status=done.status, error=done.error)


@router.get(
    "/webhooks/{hook_id}/deliveries",
    response_model=WebhookDeliveries,
    summary="A webhook's last deliveries, newest first",
)
async def webhook_deliveries(
    hook_id: str,
    svc: Svc,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> WebhookDeliveries:
    found = await svc.webhooks.log(hook_id, caller, limit)
    return WebhookDeliveries(deliveries=[_delivery(d) for d in found])
