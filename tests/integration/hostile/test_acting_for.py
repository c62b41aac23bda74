"""Acting on someone else's box never lends them your things, against a real paddockd: the
owner's fork of a member's box is the member's (their drives by name, their keys), and a
removed member's public preview neither outlives them nor wakes their box.

Before the fix a boot hook the member planted (/etc/paddock/boot.d runs at every start, as
root) read the *owner's* drive of the same name in the owner's fork; and a removed
member's public preview resumed their box, hooks and all, for anyone with the link."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from paddock import Client

from ..conftest import Server
from ..test_members import bearer, let_go, member_token

pytestmark = pytest.mark.timeout(600)
HOOK = (
    "mkdir -p /etc/paddock/boot.d && printf '#!/bin/sh\\ncat /mnt/{drive}/secret "
    "> /config/stolen 2>&1\\n' > /etc/paddock/boot.d/50-steal && chmod +x /etc/paddock/boot.d/50-steal"
)


def test_the_owners_fork_of_a_members_box_gets_the_members_drives(server: Server) -> None:
    member = member_token(server, f"f{uuid.uuid4().hex[:6]}")
    drive = f"shared-{uuid.uuid4().hex[:6]}"
    name, fork = f"src-{uuid.uuid4().hex[:6]}", f"fk-{uuid.uuid4().hex[:6]}"
    with server.client() as owner:  # the owner's drive of that name holds a secret
        keeper = f"k-{uuid.uuid4().hex[:6]}"
        owner.create_box(keeper, ttl=600, drives=[drive])
        owner.exec(keeper, ["sh", "-c", f"echo owners-secret > /mnt/{drive}/secret"], user="root")
        owner.delete_box(keeper, force=True)
    try:
        with Client(url=server.url, token=member) as m:
            m.create_box(name, ttl=600, drives=[drive])
            m.exec(name, ["sh", "-c", HOOK.format(drive=drive)], user="root")
        with server.client() as owner:
            made = owner.fork_box(name, fork)
            assert made.owner == owner.get_box(name).owner  # the member's, not the forker's
            stolen = owner.exec(fork, ["cat", "/config/stolen"]).stdout
        assert "owners-secret" not in stolen
        with Client(url=server.url, token=member) as m:
            assert fork in [b.name for b in m.list_boxes()]
    finally:
        with server.client() as owner:
            for box in (name, fork):
                owner.delete_box(box, force=True)
        let_go(server, drive)
        with server.client() as owner:
            for d in owner.list_drives():
                if d.name == drive:
                    owner.delete_drive(drive, owner=None if d.mine else d.owner)


def test_a_removed_members_preview_neither_lasts_nor_wakes_their_box(server: Server) -> None:
    username = f"r{uuid.uuid4().hex[:6]}"
    member = member_token(server, username)
    name = f"pv-{uuid.uuid4().hex[:6]}"
    with Client(url=server.url, token=member) as m:
        m.create_box(name, ttl=600)
        preview = m.create_preview(name, 8080, public=True)
        m.stop_box(name)
    removed = httpx.delete(
        f"{server.url}/v1/members/{username}", headers=bearer(server.token), timeout=60
    )
    assert removed.status_code == 200, removed.text
    try:
        path = preview.url[preview.url.index("/preview/") :]
        for _ in range(3):
            seen = httpx.get(server.url + path, timeout=30)
            assert seen.status_code == 404, seen.text
            time.sleep(0.5)
        with server.client() as owner:
            assert owner.get_box(name).state == "stopped"  # nothing woke it
            assert owner.list_previews() == []
    finally:
        with server.client() as owner:
            owner.delete_box(name, force=True)
