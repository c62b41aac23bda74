"""Members against a real paddockd: a member's view is their own boxes, drives and keys
only, checked for every route of the committed OpenAPI spec that names one with real
requests; drives of one name are each user's own volume, and a box gets only its owner's
keys; every guarded route refuses a missing or revoked token; invitations are single-use,
expire and refuse weak passwords; removing a member locks them out and keeps their boxes
and drives for the owner."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from paddock import Client, Forbidden, NotFound

from ..harness import ENGINE_SOCKET, Server
from .test_accounts import PASSWORD, create_owner, csrf_of, log_in, web

SPEC = json.loads((Path(__file__).resolve().parents[2] / "spec" / "openapi.json").read_text())
PUBLIC = {"/v1/health", "/v1/device/code", "/v1/device/token"}
# Routes naming something by a parameter that are tested elsewhere: tokens (below), and the
# owner's administration of members, refused to a member outright (403).
# Checked by other tests here: tokens (404 across users), members' administration (403).
NAMED_ELSEWHERE = {
    "/v1/tokens/{token_id}",
    "/v1/settings/{name}",  # the owner's: 403 to a member (test_every_server_wide_route...)
    "/v1/members/{username}",
    "/v1/members/{username}/limits",
}
OWNERS_KEY = "sk-owner-key-0123456789abcdef"
BOBS_KEY = "sk-bob-key-0123456789abcdef"
OWNERS_SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAups6MCT+BrWaGbvO0pV6cq5wV1W/u0DBfe4BRpvxGX owner"
)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def join(server: Server, url: str, username: str, password: str = PASSWORD) -> httpx.Response:
    with web(server) as browser:
        form = browser.get(url)
        fields = {"username": username, "new": password, "again": password}
        return browser.post(url, data={"csrf": csrf_of(form.text), **fields})


def invite(server: Server, role: str = "member") -> str:
    done = httpx.post(
        f"{server.url}/v1/members/invites", json={"role": role}, headers=bearer(server.token)
    )
    assert done.status_code == 201, done.text
    url: str = done.json()["url"]
    # The link is made for the public address; the test's server is this one.
    return server.url + url[url.index("/invite/") :]


def member_token(server: Server, username: str) -> str:
    """Join by invitation, log in on the web, and make a token through the session (as a
    person would on the dashboard)."""
    assert join(server, invite(server), username).status_code == 303
    with web(server) as browser:
        assert log_in(server, browser, username).status_code == 303
        csrf = csrf_of(browser.get("/account").text)
        made = browser.post("/v1/tokens", json={"name": "laptop"}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201, made.text
        token: str = made.json()["token"]
        return token


def db(server: Server) -> sqlite3.Connection:
    return sqlite3.connect(server.dir / "data" / "paddock.db")


def let_go(server: Server, drive: str) -> None:
    """Wait until deleted boxes let go of every drive of that name: a box's deletion
    finishes in the background, and a drive in use cannot be deleted."""
    deadline = time.monotonic() + 60
    with server.client() as owner:
        while any(d.boxes for d in owner.list_drives() if d.name == drive):
            assert time.monotonic() < deadline, f"drive {drive} is still in use"
            time.sleep(0.2)


# -- requests derived from the spec ------------------------------------------------------
def _schema(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SPEC["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def sample(node: dict[str, Any]) -> Any:
    """A small value that the schema accepts: the route itself must then answer."""
    node = _schema(node)
    if "anyOf" in node:
        return sample(next(n for n in node["anyOf"] if n.get("type") != "null"))
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type")
    if kind == "object":
        return {key: sample(node["properties"][key]) for key in node.get("required", [])}
    if kind == "array":
        return [sample(node.get("items", {}))]
    return {"integer": 1, "number": 1, "boolean": False}.get(str(kind), "x")


def requests_of(template: str, params: dict[str, str]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(method, path, httpx request arguments) for every operation of a path template."""
    path = re.sub(r"\{(\w+)\}", lambda m: params[m.group(1)], template)
    for method, op in SPEC["paths"][template].items():
        kwargs: dict[str, Any] = {
            "params": {
                p["name"]: sample(p["schema"])
                for p in op.get("parameters", [])
                if p["in"] == "query" and p.get("required")
            }
        }
        content = op.get("requestBody", {}).get("content", {})
        if "application/json" in content:
            kwargs["json"] = sample(content["application/json"]["schema"])
        elif content:
            kwargs["content"] = b""
            kwargs["headers"] = {"Content-Type": next(iter(content))}
        yield method.upper(), path, kwargs


@contextlib.contextmanager
def owner_and_bob(where: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    """A server with an owner (its test token acts as them) and a member, bob."""
    server = Server(where, upstream_dns=dns_stub.address)
    try:
        create_owner(server)
        yield server, member_token(server, "bob")
    finally:
        server.close()


@pytest.fixture(scope="module")
def two_users(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    with owner_and_bob(workdir / "members", dns_stub) as both:
        yield both


def test_a_member_finds_no_route_into_another_users_box(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    drive = f"owners-{uuid.uuid4().hex[:6]}"
    with server.client() as owner:
        box = owner.create_box("owners-box", ttl=900, drives=[drive])
        owner.snapshot_box(box.name, label="kept")
        owner.set_credential("openai", OWNERS_KEY)
        owner.set_secret("OWNERS_TOKEN", ["api.github.com"], "ghp_owner0123456789")
        owner.attach_secret(box.name, "OWNERS_TOKEN")
        preview = owner.create_preview(box.name, 8080)
        owner.create_template("owners-tpl", box.name)
        owner.add_ssh_key("owners-key", OWNERS_SSH_KEY)
        # Loopback, where nothing listens: its deliveries fail on this machine.
        hook = owner.add_webhook("http://127.0.0.1:9/owners").webhook
    # A run of the owner's box, as the run service records one.
    with db(server) as conn:
        conn.execute(
            "INSERT INTO runs (id, box_id, box_name, agent, instruction, workdir, status, "
            "started_at) VALUES ('abc123', ?, ?, 'claude', 'hi', '/config', 'done', ?)",
            (box.id, box.name, time.time()),
        )
    try:
        checked = []
        with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=60) as member:
            for template in SPEC["paths"]:
                if "{ref}" not in template and "{run_id}" not in template:
                    continue
                for ref in (box.name, box.id, box.id[:6]):
                    params = {
                        "ref": ref,
                        "run_id": "abc123",
                        "snap": "1",
                        "provider": "openai",
                        "name": "OWNERS_TOKEN",
                    }
                    for method, path, kwargs in requests_of(template, params):
                        answer = member.request(method, path, **kwargs)
                        assert answer.status_code == 404, (method, path, answer.text)
                        assert answer.json()["error"]["code"] == "not_found"
                        checked.append((method, template))
            # Every such operation of the spec was sent (and there are many).
            assert len(set(checked)) == len(checked) // 3 > 25
            # Outside a box: the owner's drive, named alone or with its owner, and key.
            for template, params in (
                ("/v1/drives/{name}", {"name": drive}),
                ("/v1/auth/{provider}", {"provider": "openai"}),
                ("/v1/secrets/{name}", {"name": "OWNERS_TOKEN"}),
                ("/v1/ssh-keys/{name}", {"name": "owners-key"}),
                *(
                    (f"/v1/webhooks/{{hook_id}}{tail}", {"hook_id": hook.id})
                    for tail in ("", "/test", "/deliveries")
                ),
                *(
                    (f"/v1/templates/{{name}}{tail}", {"name": "owners-tpl"})
                    for tail in ("", "/log", "/rebuild", "/build", "/shared")
                ),
            ):
                for method, path, kwargs in requests_of(template, params):
                    if method == "PUT" or path.endswith("/build"):
                        continue  # setting (or building) one's own reaches no one else's
                    # Sharing is the owner's alone: refused before any name is looked up.
                    refused = 403 if path.endswith("/shared") else 404
                    for whose in ({}, {"owner": "ada"}):
                        kwargs["params"] = {**kwargs["params"], **whose}
                        answer = member.request(method, path, **kwargs)
                        assert answer.status_code == refused, (method, path, whose, answer.text)
                        assert answer.json()["error"]["code"] in ("not_found", "forbidden")
                checked.append(("*", template))
            # A box made from the owner's template is refused as if it did not exist.
            made = member.post("/v1/boxes", json={"template": "owners-tpl"})
            assert made.status_code == 404, made.text
            gone = member.delete(f"/v1/previews/{preview.id}")
            assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
            assert member.get("/v1/previews").json()["previews"] == []
            checked.append(("*", "/v1/previews/{preview_id}"))
            named = {t for t in SPEC["paths"] if "{" in t and t not in NAMED_ELSEWHERE}
            assert {t for _, t in checked} == named
            assert member.get("/v1/drives").json()["drives"] == []
        # The interactive exec (a WebSocket, outside the spec) likewise.
        with Client(url=server.url, token=bob) as member_sdk:
            session = member_sdk.exec_session(box.name, ["true"])
            with pytest.raises(NotFound):
                list(session)
            session.close()
        with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=60) as member:
            # Lists leave it out; the member's own work is unaffected.
            assert member.get("/v1/boxes").json()["boxes"] == []
            assert member.get("/v1/stats").json()["boxes"] == []
            assert member.get("/v1/secrets").json()["secrets"] == []
            assert member.get("/v1/templates").json()["templates"] == []
            assert member.get("/v1/ssh-keys").json()["keys"] == []
        with server.client() as owner:
            # Nothing the member sent changed it, and the owner still reaches all of it.
            still = owner.get_box(box.id)
            assert still.state == "running" and still.network.mode == box.network.mode
            assert [s.label for s in owner.list_snapshots(box.name)] == ["kept"]
            assert owner.get_run("abc123").box == box.name
            assert [d.boxes for d in owner.list_drives() if d.name == drive] == [[box.name]]
            keys = {c.provider: c.configured for c in owner.list_credentials()}
            assert keys["openai"]
            assert [(s.name, s.boxes) for s in owner.list_secrets()] == [
                ("OWNERS_TOKEN", [box.name])
            ]
            assert owner.get_template("owners-tpl").status == "ready"
            assert [k.name for k in owner.list_ssh_keys()] == ["owners-key"]
            assert [h.id for h in owner.list_webhooks()] == [hook.id]
    finally:
        with server.client() as owner:
            owner.delete_box(box.name, force=True)
            owner.delete_credential("openai")
            owner.delete_secret("OWNERS_TOKEN")
            owner.delete_template("owners-tpl")
            owner.delete_ssh_key("owners-key")
            owner.delete_webhook(hook.id)
        let_go(server, drive)
        with server.client() as owner:
            owner.delete_drive(drive)


# Paths that concern each caller's own things (boxes, imports of boxes, drives, keys, previews,
# runs, tokens, the live list, their audit entries) or that everyone may read (types,
# agents, health, status scoped to the caller, the device login's public steps). Anything
# else is the server's: owner-only.
PER_USER = re.compile(
    r"/v1/(boxes|imports|drives|auth|secrets|previews|runs|tokens|events|device|health|types|"
    r"agents|stats|templates|ssh-keys|audit|webhooks|"
    r"status)"
    r"(/|$)"
)


def test_every_server_wide_route_is_the_owners(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    owner_only = {
        (method.upper(), template)
        for template, ops in SPEC["paths"].items()
        for method, op in ops.items()
        if op.get("x-owner-only")
    }
    server_wide = {
        (method.upper(), template)
        for template, ops in SPEC["paths"].items()
        for method in ops
        if not PER_USER.match(template)
    }
    assert server_wide and server_wide <= owner_only, server_wide - owner_only
    assert ("POST", "/v1/images/build") in owner_only  # a member once rebuilt it for all
    with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=60) as member:
        for method, template in sorted(owner_only):
            params = {"username": "bob", "token_id": "x", "name": "boxes.default_ttl"}
            for sent, path, kwargs in requests_of(template, params):
                if sent != method:
                    continue
                answer = member.request(method, path, **kwargs)
                assert answer.status_code == 403, (method, path, answer.text)
                assert answer.json()["error"]["code"] == "forbidden"


def test_status_tells_a_member_of_their_own_boxes_only(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    with server.client() as owner:
        owner.create_box("owners-secret-name", ttl=600)
    try:
        # The owner's box in error: written while paddockd is down (it reads its rows once,
        # as it starts), with its container gone and its disk named as a copy that does
        # not exist, so that remaking it fails at every pass and the box stays in error.
        with server.client() as owner:
            box_id = owner.get_box("owners-secret-name").id
        server.kill()
        subprocess.run(
            ["docker", "-H", f"unix://{ENGINE_SOCKET}", "rm", "-f", f"paddock-{box_id}"],
            capture_output=True,
        )
        with db(server) as conn:
            conn.execute(
                "UPDATE boxes SET state = 'error', message = 'owners-secret-reason', "
                "current_snapshot = image, current_disk = ? WHERE id = ?",
                (f"{box_id}/9r00000000", box_id),
            )
        server.start()
        for _ in range(50):
            with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=60) as member:
                seen = member.get("/v1/status")
            assert seen.status_code == 200
            text = seen.text
            assert "owners-secret" not in text and seen.json()["boxes_running"] == 0
            assert seen.json()["capacity"]["cpus_total"] > 0  # what all share, to plan by
            with server.client() as owner:
                if any("owners-secret-name" in p for p in owner.status().problems):
                    break
            time.sleep(0.2)
        else:
            raise AssertionError("the owner never saw their box's error in the status")
    finally:
        with server.client() as owner:
            owner.delete_box("owners-secret-name", force=True)


def test_a_members_own_box_is_theirs_and_the_owner_sees_it(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    with Client(url=server.url, token=bob) as member:
        mine = member.create_box("bobs-box", ttl=900)
        try:
            assert mine.owner == "bob" and mine.mine
            assert member.exec(mine.name, ["true"]).exit_code == 0
            assert [b.name for b in member.list_boxes()] == ["bobs-box"]
            with server.client() as owner:
                seen = {b.name: b for b in owner.list_boxes()}
                assert seen["bobs-box"].owner == "bob" and not seen["bobs-box"].mine
            # The owner's administration is refused outright (it concerns no one's box);
            # drives and keys are the member's own.
            refused = httpx.get(f"{server.url}/v1/members", headers=bearer(bob))
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
            for path in ("/v1/drives", "/v1/auth", "/v1/agents"):
                assert httpx.get(server.url + path, headers=bearer(bob)).status_code == 200
        finally:
            member.delete_box(mine.name, force=True)


def test_a_shared_template_is_usable_and_not_changeable(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    with server.client() as owner:
        src = owner.create_box("tpl-source", ttl=900)
        owner.exec(src.name, ["sh", "-c", "echo owners > /opt/made-by"], user="root")
        owner.create_template("team-base", src.name, env={"TEAM": "1"})
    try:
        with Client(url=server.url, token=bob) as member:
            assert [t.name for t in member.list_templates()] == []
            with pytest.raises(Forbidden):
                member.share_template("team-base", True)
            with server.client() as owner:
                owner.share_template("team-base", True)
            [seen] = member.list_templates()
            assert (seen.name, seen.owner, seen.mine, seen.shared) == (
                "team-base",
                "ada",
                False,
                True,
            )
            made = member.create_box("bobs-from-tpl", ttl=900, template="team-base")
            try:
                got = member.exec(made.name, ["sh", "-c", "cat /opt/made-by; echo $TEAM"])
                assert got.stdout == "owners\n1\n", got.stderr
                # What the member did in their box stays there.
                member.exec(made.name, ["sh", "-c", "echo bob > /opt/made-by"], user="root")
            finally:
                member.delete_box(made.name, force=True)
            # Shared is not theirs: no rebuild, no delete, and a name of their own is.
            for change in (member.rebuild_template, member.delete_template):
                with pytest.raises(NotFound):
                    change("team-base")
            with server.client() as owner:
                again = owner.create_box("tpl-check", ttl=900, template="team-base")
                out = owner.exec(again.name, ["cat", "/opt/made-by"]).stdout
                owner.delete_box(again.name, force=True)
            assert out == "owners\n"
    finally:
        with server.client() as owner:
            owner.delete_template("team-base")
            owner.delete_box(src.name, force=True)


def test_drives_and_keys_are_each_users_own(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    gina = member_token(server, "gina")
    drive = f"shared-{uuid.uuid4().hex[:6]}"
    answers: list[httpx.Response] = []

    def call(token: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        answer = httpx.request(method, server.url + path, headers=bearer(token), **kwargs)
        answers.append(answer)
        return answer

    def configured(token: str) -> set[str]:
        listed = call(token, "GET", "/v1/auth").json()["providers"]
        return {p["provider"] for p in listed if p["configured"]}

    with Client(url=server.url, token=bob) as b, Client(url=server.url, token=gina) as g:
        bobs = b.create_box("bobs-drive-box", ttl=900, drives=[drive])
        ginas = g.create_box("ginas-drive-box", ttl=900, drives=[drive])
        try:
            # One name, two volumes: what bob writes, gina's box does not see.
            wrote = b.exec(bobs.name, ["sh", "-c", f"echo bob > /mnt/{drive}/who"])
            assert wrote.exit_code == 0, wrote.stderr
            assert g.exec(ginas.name, ["ls", "-A", f"/mnt/{drive}"]).stdout == ""
            assert b.exec(bobs.name, ["cat", f"/mnt/{drive}/who"]).stdout == "bob\n"
            [seen] = b.list_drives()
            assert (seen.name, seen.boxes, seen.owner) == (drive, [bobs.name], "bob")
            assert [d.boxes for d in g.list_drives()] == [[ginas.name]]
            refused = call(bob, "DELETE", f"/v1/drives/{drive}", params={"owner": "gina"})
            assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
            listed = server.cli("drive", "ls", check=True).stdout
            assert "OWNER" in listed and listed.count(drive) == 2
            assert {"bob", "gina"} <= set(listed.split())

            # Keys: bob's are bob's; the owner's are the owner's.
            # In env mode, so the box's environment shows whose key it got (in the default
            # gateway mode it shows a placeholder: test_gateway.py).
            bobs_key = {"key": BOBS_KEY, "mode": "env"}
            assert call(bob, "PUT", "/v1/auth/anthropic", json=bobs_key).is_success
            assert "anthropic" not in configured(server.token)
            assert call(server.token, "PUT", "/v1/auth/anthropic", json={"key": OWNERS_KEY})
            assert configured(gina) == set() and configured(bob) == {"anthropic"}
            owners_ls = server.cli("auth", "ls", check=True).stdout
            assert re.search(r"^anthropic +set\b", owners_ls, re.M), owners_ls
            # A box gets its owner's key, whoever attaches it: the owner attaching to bob's
            # box gives it bob's; to gina's (she has none) it is refused, naming her.
            assert call(server.token, "PUT", f"/v1/boxes/{bobs.name}/auth/anthropic").is_success
            key = b.exec(bobs.name, ["printenv", "ANTHROPIC_API_KEY"]).stdout.strip()
            assert key == BOBS_KEY
            missing = call(server.token, "PUT", f"/v1/boxes/{ginas.name}/auth/anthropic")
            assert missing.status_code == 404 and "gina has not set one" in missing.text
            assert call(gina, "PUT", f"/v1/boxes/{bobs.name}/auth/anthropic").status_code == 404
            # Forgetting bob's key detaches it from bob's box; the owner's stays.
            assert call(bob, "DELETE", "/v1/auth/anthropic").status_code == 204
            assert call(bob, "GET", f"/v1/boxes/{bobs.name}/auth").json()["providers"] == []
            assert b.exec(bobs.name, ["printenv", "ANTHROPIC_API_KEY"]).exit_code == 1
            assert "anthropic" in configured(server.token)
            for token in (bob, gina, server.token):
                for path in ("/v1/boxes", "/v1/drives", "/v1/agents", "/v1/tokens"):
                    call(token, "GET", path)
            # No answer to anyone carried a key.
            assert all(k not in a.text for a in answers for k in (BOBS_KEY, OWNERS_KEY))
        finally:
            b.delete_box(bobs.name, force=True)
            g.delete_box(ginas.name, force=True)
            call(server.token, "DELETE", "/v1/auth/anthropic")
        let_go(server, drive)
        b.delete_drive(drive)
        server.cli("drive", "rm", drive, "--owner", "gina", check=True)
        assert drive not in server.cli("drive", "ls", check=True).stdout
    assert server.cli("members", "rm", "gina").returncode == 0


def guarded_routes() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for template in SPEC["paths"]:
        if template in PUBLIC:
            continue
        params = {name: "x" for name in re.findall(r"\{(\w+)\}", template)}
        yield from requests_of(template, params)


def test_every_guarded_route_refuses_no_token_and_a_revoked_one(
    two_users: tuple[Server, str],
) -> None:
    server, bob = two_users
    with httpx.Client(base_url=server.url, headers=bearer(bob), timeout=30) as member:
        made = member.post("/v1/tokens", json={"name": "short-lived"}).json()
        doomed = made["token"]
        # Used once, so its verification is cached: the revoke must still be at once.
        assert httpx.get(f"{server.url}/v1/boxes", headers=bearer(doomed)).status_code == 200
        assert made["id"] in [t["id"] for t in member.get("/v1/tokens").json()["tokens"]]
        assert member.delete(f"/v1/tokens/{made['id']}").status_code == 204
        # Another user's token is missing to a member, as a missing one.
        owners = httpx.get(f"{server.url}/v1/tokens", headers=bearer(server.token)).json()
        others = [t["id"] for t in owners["tokens"] if t["user"] != "bob"]
        assert others and member.delete(f"/v1/tokens/{others[0]}").status_code == 404
    # The CLI's view (the owner's: everyone's tokens, with whose).
    made_by_cli = server.cli("token", "create", "ci", check=True).stdout.strip()
    listed = server.cli("token", "ls", check=True).stdout
    assert made_by_cli.startswith("pdk_") and "ci" in listed and "bob" in listed
    assert "short-lived" not in listed
    checked = 0
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        for method, path, kwargs in guarded_routes():
            for headers in ({}, bearer(doomed), bearer("pdk_not-a-token")):
                answer = anonymous.request(
                    method, path, **{**kwargs, "headers": {**kwargs.get("headers", {}), **headers}}
                )
                assert answer.status_code == 401, (method, path, headers, answer.text)
            checked += 1
    assert checked > 40


def test_invitations_are_single_use_expire_and_refuse_weak_passwords(
    two_users: tuple[Server, str],
) -> None:
    server, _ = two_users
    link = invite(server)
    weak = join(server, link, "carol", "short")
    assert weak.status_code == 400 and "at least 12" in weak.text
    taken = join(server, link, "bob")
    assert taken.status_code == 400 and "taken" in taken.text
    assert join(server, link, "carol").status_code == 303  # the refusals spent nothing
    for again in (httpx.get(link), httpx.post(link, data={"username": "dave"})):
        assert again.status_code == 410 and "has been used" in again.text
    expired = invite(server)
    with db(server) as conn:
        conn.execute("UPDATE links SET expires_at = ? WHERE used_at IS NULL", (time.time() - 1,))
    gone = httpx.get(expired)
    assert gone.status_code == 410 and "expired" in gone.text
    assert httpx.get(server.url + "/invite/not-a-link").status_code == 404
    # An owner's invitation makes an owner; a setup link cannot make a second one.
    assert join(server, invite(server, "owner"), "erin").status_code == 303
    members = httpx.get(f"{server.url}/v1/members", headers=bearer(server.token)).json()
    roles = {m["username"]: m["role"] for m in members["members"]}
    assert roles == {"ada": "owner", "bob": "member", "carol": "member", "erin": "owner"}


def test_removing_a_member_locks_them_out_and_keeps_their_boxes(
    two_users: tuple[Server, str],
) -> None:
    server, _ = two_users
    token = member_token(server, "frank")
    drive = f"franks-{uuid.uuid4().hex[:6]}"
    with Client(url=server.url, token=token) as frank:
        box = frank.create_box("franks-box", ttl=900, drives=[drive])
        frank.set_credential("openai", BOBS_KEY)
    with web(server) as browser:
        assert log_in(server, browser, "frank").status_code == 303
        assert browser.get("/account").status_code == 200
        removed = httpx.delete(
            f"{server.url}/v1/members/frank", headers=bearer(server.token), timeout=120
        )
        assert removed.status_code == 200, removed.text
        assert removed.json() == {
            "username": "frank",
            "tokens_revoked": 1,
            "boxes_stopped": ["franks-box"],
        }
        assert browser.get("/account").status_code == 303  # the session is gone
    answer = httpx.get(f"{server.url}/v1/boxes", headers=bearer(token))
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    with web(server) as browser:
        assert log_in(server, browser, "frank").status_code != 303
    # The owner's view from the CLI: whose each box is, and only theirs with --mine.
    listed = server.cli("ls", check=True).stdout
    assert "OWNER" in listed and "(removed user)" in listed
    assert "franks-box" not in server.cli("ls", "--mine", check=True).stdout
    assert "frank" not in server.cli("members", "ls", check=True).stdout
    with server.client() as owner:
        kept = owner.get_box(box.id)
        assert kept.state == "stopped" and kept.owner == "(removed user)"
        owner.delete_box(box.id)
    # Their drive is kept, for the owner, who names it by the account's id; their keys went.
    [theirs] = [d for d in json.loads(server.cli("drive", "ls", "--json").stdout) if not d["mine"]]
    assert theirs["name"] == drive and theirs["owner"] == "(removed user)"
    assert f"(removed user) {theirs['owner_id']}" in server.cli("drive", "ls").stdout
    with db(server) as conn:
        left = conn.execute("SELECT 1 FROM credentials WHERE user_id = ?", (theirs["owner_id"],))
        assert left.fetchall() == []
    let_go(server, drive)
    server.cli("drive", "rm", drive, "--owner", theirs["owner_id"], check=True)
    assert drive not in server.cli("drive", "ls").stdout
    gone = httpx.delete(f"{server.url}/v1/members/frank", headers=bearer(server.token))
    assert gone.status_code == 404


def test_a_members_limits_refuse_by_name_and_the_owner_has_none(
    two_users: tuple[Server, str],
) -> None:
    server, _ = two_users
    token = member_token(server, "gina")
    set_by_cli = server.cli(
        "members", "limits", "gina", "--max-boxes", "1", "--max-memory", "1g", check=True
    )
    assert "1 boxes, 1024 MiB" in set_by_cli.stderr
    assert "1 boxes, 1024 MiB" in server.cli("members", "ls", check=True).stdout
    with Client(url=server.url, token=token) as gina:
        box = gina.create_box("ginas-box", ttl=900)
        try:
            refused = httpx.post(
                f"{server.url}/v1/boxes", json={"name": "ginas-second"}, headers=bearer(token)
            )
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["code"] == "capacity_exceeded" and "limit is 1 box" in error["message"]
            assert error["details"] == {"limit": "max_boxes", "value": 1}
            # Lifting one limit keeps the other; the memory limit now speaks.
            server.cli("members", "limits", "gina", "--max-boxes", "none", check=True)
            second = httpx.post(
                f"{server.url}/v1/boxes", json={"name": "ginas-second"}, headers=bearer(token)
            )
            assert second.status_code == 409 and "MiB of memory" in second.text
            # A stopped box frees its memory for a resume, and the limit holds the resume.
            gina.stop_box(box.name)
            made = gina.create_box("ginas-second", ttl=900)
            with pytest.raises(Exception, match="MiB of memory"):
                gina.resume_box(box.name)
            gina.delete_box(made.name, force=True)
        finally:
            gina.delete_box(box.name, force=True)
    # Bad input changes nothing; an owner has no limits to set.
    for argv, message in [
        (["--max-cpus", "0"], "not a number of CPUs"),
        (["--max-memory", "lots"], "is not a size like"),
    ]:
        bad = server.cli("members", "limits", "gina", *argv)
        assert bad.returncode == 2 and message in bad.stderr
    owner = server.cli("members", "limits", "ada", "--max-boxes", "3")
    assert owner.returncode != 0 and "owners have no limits" in owner.stderr
    nobody = httpx.put(
        f"{server.url}/v1/members/nobody/limits", json={}, headers=bearer(server.token)
    )
    assert nobody.status_code == 404
    assert "1024 MiB" in server.cli("members", "ls", check=True).stdout


def test_an_expiring_token_stops_working_when_it_expires(two_users: tuple[Server, str]) -> None:
    server, bob = two_users
    made = server.cli("token", "create", "short", "--expires", "2h", "--json", check=True)
    token = json.loads(made.stdout)
    assert token["expires_at"] is not None
    assert httpx.get(f"{server.url}/v1/boxes", headers=bearer(token["token"])).status_code == 200
    assert "in 1h" in server.cli("token", "ls", check=True).stdout
    # Time passes (in the database: a test cannot wait two hours) for a token not yet seen.
    unseen = httpx.post(
        f"{server.url}/v1/tokens", json={"name": "unseen", "expires_in": 60}, headers=bearer(bob)
    ).json()
    with db(server) as conn:
        conn.execute(
            "UPDATE tokens SET expires_at = ? WHERE id = ?", (time.time() - 1, unseen["id"])
        )
    answer = httpx.get(f"{server.url}/v1/boxes", headers=bearer(unseen["token"]))
    assert answer.status_code == 401
    assert "expired" in server.cli("token", "ls", check=True).stdout
    too_short = httpx.post(
        f"{server.url}/v1/tokens", json={"name": "x", "expires_in": 5}, headers=bearer(bob)
    )
    assert too_short.status_code == 400 and "expires in" in too_short.text
    bad = server.cli("token", "create", "x", "--expires", "soon")
    assert bad.returncode == 2 and "invalid duration 'soon'" in bad.stderr
