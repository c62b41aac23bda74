"""A member's allowlist against a real paddockd and the test's on-machine internet: what
an allowlist may open is the public internet and what the server's owner opened in the
configuration (`[network] open_ranges`), nothing else, whoever asks and by whichever
surface (the API, `paddock network`, E2B's allowOut). Each refusal is checked twice: the
API says no, and a listener behind the address saw nothing.

Before the fix a member's `paddock network BOX allow 10.77.77.2/32` (a namespace on the
server) let their box reach it, and `0.0.0.0/0` was taken."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from paddock import Client, InvalidRequest

from ...netlab import AZURE_METADATA, LINK_NS, PRIVATE, TestInternet
from ..conftest import Server
from ..test_members import member_token

pytestmark = pytest.mark.timeout(600)
TOOLS = Path(__file__).with_name("boxtools.py")
OPENED = "10.99.0.0/24"  # PRIVATE's network, opened by the owner on one of the servers


@pytest.fixture(scope="module")
def member(server: Server) -> str:
    return member_token(server, f"m{uuid.uuid4().hex[:6]}")


@pytest.fixture
def member_box(server: Server, member: str) -> Iterator[str]:
    name = f"mn-{uuid.uuid4().hex[:6]}"
    with Client(url=server.url, token=member) as c:
        c.create_box(name, ttl=900)
        c.push(name, [str(TOOLS)], "/tmp")
    yield name
    with server.client() as c:
        c.delete_box(name, force=True)


def connects(server: Server, token: str, box: str, target: str) -> bool:
    with Client(url=server.url, token=token) as c:
        done = c.exec(
            box, ["python3", "/tmp/boxtools.py", "connect", "0.0.0.0", target, "80"], user="root"
        )
    return "connected" in done.stdout


@pytest.mark.parametrize(
    ("target", "what"),
    [
        (f"{PRIVATE}/32", "not on the public internet"),
        ("0.0.0.0/0", "a cloud metadata service"),
        (f"{LINK_NS}/32", "one of the server's own networks"),
        (f"{AZURE_METADATA}/32", "a cloud metadata service"),
    ],
)
def test_a_members_allowlist_cannot_open_the_servers_networks(
    server: Server, member: str, member_box: str, internet: TestInternet, target: str, what: str
) -> None:
    internet.reset()
    with Client(url=server.url, token=member) as c, pytest.raises(InvalidRequest) as refused:
        c.set_network(member_box, "allowlist", [target])
    assert what in str(refused.value)
    # The box's policy is as it was (allow-all: the public internet only), and nothing got
    # through to what it named.
    address = target.split("/")[0] if target != "0.0.0.0/0" else PRIVATE
    assert not connects(server, member, member_box, address)
    assert internet.connections(address) == []


def test_e2b_allow_out_is_held_to_the_same_rule(server: Server, member: str) -> None:
    refused = httpx.post(
        f"{server.url}/e2b/sandboxes",
        json={"templateID": "base", "network": {"allowOut": [f"{PRIVATE}/32"]}},
        headers={"X-API-Key": member},
        timeout=60,
    )
    assert refused.status_code == 400, refused.text
    assert "not on the public internet" in refused.json()["message"]


def test_what_the_owner_opened_may_be_named_and_reached(
    make_server: type[Server], internet: TestInternet
) -> None:
    srv = make_server(network_open_ranges=[OPENED])
    name = f"op-{uuid.uuid4().hex[:6]}"
    internet.reset()
    with srv.client() as c:
        c.create_box(name, ttl=600)
        c.push(name, [str(TOOLS)], "/tmp")
        # Within what was opened: taken, and reached. Beyond it: refused.
        c.set_network(name, "allowlist", [f"{PRIVATE}/32"])
        assert connects(srv, srv.token, name, PRIVATE)
        with pytest.raises(InvalidRequest):
            c.set_network(name, "allowlist", ["10.99.0.0/16"])
    assert len(internet.connections(PRIVATE)) == 1


def test_an_allowlist_stored_before_the_rule_opens_nothing(
    server: Server, member: str, member_box: str, internet: TestInternet
) -> None:
    """The rules refuse closed ranges before any allowlist: a policy in the store from an
    older version (planted here) cannot reach them either."""
    with Client(url=server.url, token=member) as c:
        box_id = c.get_box(member_box).id
        c.set_network(member_box, "allowlist", ["198.18.1.1/32"])
    planted = json.dumps({"mode": "allowlist", "allow": [f"{PRIVATE}/32"]})
    server.kill()  # paddockd reads its rows as it starts: the plant is what it finds
    with sqlite3.connect(server.dir / "data" / "paddock.db") as db:
        db.execute("UPDATE boxes SET network = ? WHERE id = ?", (planted, box_id))
    server.start()
    time.sleep(4)  # the reconciler's pass (every 2 s here) writes the rules from the store
    with Client(url=server.url, token=member) as c:
        assert c.get_network(member_box).allow == [f"{PRIVATE}/32"]  # the plant took
    internet.reset()
    assert not connects(server, member, member_box, PRIVATE)
    assert internet.connections(PRIVATE) == []
