"""/v1/device: the device login's two calls, made before the device has a token (so
outside the token gate). The approval is a web page (routes/web.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from paddock.wire.models import DeviceCode, DevicePoll, DeviceStart, DeviceToken

from ...services.devices import INTERVAL, TTL
from ..deps import Svc

public = APIRouter(tags=["accounts"])


@public.post("/device/code", response_model=DeviceCode, summary="Start a device login")
async def device_code(body: DeviceStart, request: Request, svc: Svc) -> DeviceCode:
    address = request.client.host if request.client else "?"
    started = await svc.devices.start(body.client, address)
    page = f"{svc.devices.public_url()}/device"
    return DeviceCode(
        device_code=started.device_code,
        user_code=started.user_code,
        verification_uri=page,
        verification_uri_complete=f"{page}?code={started.user_code}",
        interval=INTERVAL,
        expires_in=TTL,
    )


@public.post("/device/token", response_model=DeviceToken, summary="Poll a device login")
async def device_token(body: DevicePoll, svc: Svc) -> DeviceToken:
    status, token = await svc.devices.poll(body.device_code)
    return DeviceToken(status=status, token=token)
