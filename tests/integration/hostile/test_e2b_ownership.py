"""A member against another member's E2B sandboxes, snapshots and forks, through the E2B
API of a real paddockd: every way to name them (a listing's filters and page tokens, a
snapshot id as a template, fork, snapshot, delete) finds nothing, exactly as for what does
not exist, and changes nothing of theirs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ..conftest import Server
from ..test_accounts import create_owner
from ..test_members import member_token

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def people(make_server: type[Server]) -> Iterator[tuple[Server, str, str]]:
    server = make_server()
    create_owner(server)
    yield server, member_token(server, "alice"), member_token(server, "mallory")


def e2b(server: Server, token: str) -> httpx.Client:
    return httpx.Client(base_url=f"{server.url}/e2b", headers={"X-API-Key": token}, timeout=120)


def test_another_members_sandboxes_and_snapshots_are_not_there(
    people: tuple[Server, str, str],
) -> None:
    server, alice_token, mallory_token = people
    with e2b(server, alice_token) as alice, e2b(server, mallory_token) as mallory:
        made = alice.post("/sandboxes", json={"templateID": "base", "metadata": {"k": "a"}})
        assert made.status_code == 201, made.text
        box = made.json()["sandboxID"]
        try:
            snap = alice.post(f"/sandboxes/{box}/snapshots", json={"name": "secret"})
            assert snap.status_code == 201, snap.text
            snap_id = snap.json()["snapshotID"]
            # Two more of Alice's, so her listing has pages and a token to hand around.
            others = [alice.post("/sandboxes", json={}).json()["sandboxID"] for _ in range(2)]
            page = alice.get("/v2/sandboxes", params={"limit": 1})
            token = page.headers["x-next-token"]

            # Mallory's listings: nothing of Alice's, however asked.
            for params in (
                {},
                {"metadata": "k=a"},
                {"state": "running,paused"},
                {"nextToken": token},
                {"order": "desc", "nextToken": token},
            ):
                listed = mallory.get("/v2/sandboxes", params=params)
                assert listed.status_code == 200 and listed.json() == [], params
            assert mallory.get("/sandboxes").json() == []
            for params in ({}, {"sandboxID": box}, {"name": "secret"}, {"name": snap_id}):
                listed = mallory.get("/snapshots", params=params)
                assert listed.status_code == 200 and listed.json() == [], params

            # Naming them: not found, as what does not exist.
            tries = [
                mallory.post("/sandboxes", json={"templateID": snap_id}),
                mallory.post(f"/sandboxes/{box}/fork", json={"count": 1}),
                mallory.post(f"/sandboxes/{box}/snapshots", json={}),
                mallory.delete(f"/templates/{snap_id}"),
                mallory.get(f"/sandboxes/{box}"),
                mallory.post(f"/sandboxes/{box}/connect", json={"timeout": 60}),
            ]
            for tried in tries:
                assert tried.status_code == 404, (tried.request.url, tried.text)
            ghost = mallory.post("/sandboxes", json={"templateID": f"{'0' * 12}:1"})
            assert ghost.status_code == 404
            assert ghost.json()["message"].replace("0" * 12, box) == tries[0].json()["message"]

            # Alice's are untouched, and Mallory made nothing.
            assert [s["snapshotID"] for s in alice.get("/snapshots").json()] == [snap_id]
            assert len(alice.get("/v2/sandboxes").json()) == 3
            assert mallory.get("/v2/sandboxes").json() == []
        finally:
            for sandbox in [box, *locals().get("others", [])]:
                alice.delete(f"/sandboxes/{sandbox}")
