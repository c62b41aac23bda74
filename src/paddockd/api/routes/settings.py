"""/v1/settings: the server's settings, changed while it runs (the owner's; settings.py)."""

from __future__ import annotations

from fastapi import APIRouter

from paddock.wire.models import Setting, SettingChange, SettingList

from ...services.settings import SettingView
from ..deps import Owner, Svc

router = APIRouter(tags=["settings"])


def present(s: SettingView) -> Setting:
    return Setting(
        key=s.key,
        kind=s.kind,
        help=s.help,
        value=s.value,
        file_value=s.file_value,
        source=s.source,
        choices=list(s.choices),
    )


@router.get("/settings", response_model=SettingList, summary="The server's settings (owner)")
async def list_settings(svc: Svc, _: Owner) -> SettingList:
    return SettingList(settings=[present(s) for s in svc.settings.list()])


@router.get("/settings/{name}", response_model=Setting, summary="One setting (owner)")
async def get_setting(name: str, svc: Svc, _: Owner) -> Setting:
    return present(svc.settings.get(name))


@router.put(
    "/settings/{name}",
    response_model=Setting,
    summary="Change a setting: boxes made, resumed or stopped from now on follow it (owner)",
)
async def set_setting(name: str, body: SettingChange, svc: Svc, _: Owner) -> Setting:
    return present(await svc.settings.set(name, body.value))


@router.delete(
    "/settings/{name}",
    response_model=Setting,
    summary="Reset a setting to paddockd.toml's value, or the default (owner)",
)
async def reset_setting(name: str, svc: Svc, _: Owner) -> Setting:
    return present(await svc.settings.reset(name))
