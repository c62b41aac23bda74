"""An E2B sandbox's ports at PORT-ID.DOMAIN (services/e2b/hosts.py): found without a
preview of their own, public or opened by that sandbox's traffic token only, waking the
box only with autoResume; a box made outside E2B has no such address."""

from __future__ import annotations

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.previews import Target, target_of

from ...conftest import World

pytestmark = pytest.mark.anyio


async def test_a_sandbox_port_is_found_with_its_rules(world: World) -> None:
    e2b = world.services.e2b
    previews = world.services.previews
    caller = await e2b.authenticate(world.token)
    public = await e2b.create(caller, "base", 600, {}, {}, None, None)
    private = await e2b.create(
        caller,
        "base",
        600,
        {},
        {},
        None,
        {"allowPublicTraffic": False},
        auto_pause=True,
        auto_resume=True,
    )
    open_port = await previews.find(Target(public.box.id, 8000, "/", ""))
    assert open_port is not None and open_port.public and not open_port.wakes
    assert e2b.traffic_token(public) is None

    closed = await previews.find(Target(private.box.id, 8000, "/", ""))
    token = e2b.traffic_token(private)
    assert closed is not None and not closed.public and closed.wakes and token
    assert previews.traffic_ok(closed, token)
    assert not previews.traffic_ok(closed, "")
    assert not previews.traffic_ok(closed, token[:-1])
    assert not previews.traffic_ok(closed, "pdt_\u00e9" + token[5:])  # not ASCII: refused
    # The envd token is another purpose's: it does not open the ports.
    assert not previews.traffic_ok(closed, e2b.envd_token(private.box.id))
    # Another sandbox's token opens only its own.
    other = await e2b.create(caller, "base", 600, {}, {}, None, {"allowPublicTraffic": False})
    assert not previews.traffic_ok(closed, e2b.traffic_token(other) or "")


async def test_a_box_made_outside_e2b_needs_a_preview(world: World) -> None:
    box = await world.boxes.create("plain", "small", 600, "stop")
    assert await world.services.previews.find(Target(box.id, 8000, "/", "")) is None
    made = await world.services.previews.create(box.id, 8000, False, None, None)
    found = await world.services.previews.find(Target(box.id, 8000, "/", ""))
    assert found == made.preview
    # A preview's own secret is what opens it, never a traffic token.
    assert not world.services.previews.traffic_ok(found, "pdt_x")


async def test_auto_resume_needs_auto_pause(world: World) -> None:
    e2b = world.services.e2b
    caller = await e2b.authenticate(world.token)
    with pytest.raises(InvalidRequest, match="autoPause"):
        await e2b.create(caller, "base", 600, {}, {}, None, None, auto_resume=True)


async def test_no_certificate_for_a_sandbox_port_and_no_port_out_of_range(world: World) -> None:
    """Caddy asks before each certificate: a sandbox's ports do not get one each (anyone
    knowing its id could have them ordered without end); a port past 65535 is no address."""
    e2b = world.services.e2b
    previews = world.services.previews
    caller = await e2b.authenticate(world.token)
    s = await e2b.create(caller, "base", 600, {}, {}, None, None)
    assert await previews.find(Target(s.box.id, 8000, "/", "")) is not None
    previews.routed_host = lambda: "paddock.example.com"
    assert not await previews.has_domain(f"8000-{s.box.id}.paddock.example.com")
    assert await previews.find(Target(s.box.id, 99999, "/", "")) is None
    assert target_of(f"99999-{s.box.id}.paddock.example.com", "/", "paddock.example.com") is None
    assert target_of("/", f"/preview/{s.box.id}/70000/", None) is None
    await previews.create(s.box.id, 8000, True, None, None)
    assert await previews.has_domain(f"8000-{s.box.id}.paddock.example.com")
