"""Provider credentials through the API on fakes: write-only secrets, encrypted at rest,
given to a box's commands only once attached."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from paddockd.api.app import create_app

from ..conftest import People, World

SECRET = "sk-ant-test-0123456789abcdef"


@pytest.fixture
def api(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.services)) as client:
        client.headers["Authorization"] = f"Bearer {world.token}"
        yield client


def test_secrets_are_write_only_and_encrypted_at_rest(api: TestClient, world: World) -> None:
    resp = api.put("/v1/auth/anthropic", json={"key": SECRET, "base_url": "http://127.0.0.1:9/"})
    assert resp.status_code == 200 and SECRET not in resp.text
    assert resp.json()["base_url"] == "http://127.0.0.1:9"
    listed = api.get("/v1/auth")
    assert SECRET not in listed.text
    rows = {r["provider"]: r for r in listed.json()["providers"]}
    assert rows["anthropic"]["configured"] and not rows["openai"]["configured"]
    raw = (world.cfg.data_dir / "paddock.db").read_bytes()
    assert SECRET.encode() not in raw
    key_file = world.cfg.data_dir / "credentials.key"
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_attached_boxes_get_a_placeholder_and_the_gateway(api: TestClient, world: World) -> None:
    assert api.put("/v1/auth/anthropic", json={"key": SECRET}).json()["mode"] == "gateway"
    api.post("/v1/boxes", json={"name": "with"})
    api.post("/v1/boxes", json={"name": "other"})
    api.post("/v1/boxes", json={"name": "without"})
    assert api.put("/v1/boxes/with/auth/anthropic").json() == {"providers": ["anthropic"]}
    api.put("/v1/boxes/other/auth/anthropic")
    for box in ("with", "other", "without"):
        api.post(f"/v1/boxes/{box}/exec?wait=true", json={"cmd": ["env"]})
    with_env, other_env, without_env = (spec.env for spec in world.runtime.execs[-3:])
    assert with_env["ANTHROPIC_API_KEY"].startswith("sk-paddock-")
    assert SECRET not in str(with_env)
    assert other_env["ANTHROPIC_API_KEY"] != with_env["ANTHROPIC_API_KEY"]  # one per box
    assert with_env["ANTHROPIC_BASE_URL"] == "http://10.213.0.1/anthropic"
    assert "ANTHROPIC_API_KEY" not in without_env
    assert api.get("/v1/auth").json()["providers"][0]["last_used_at"] is not None


def test_a_key_of_env_mode_is_the_one_the_box_gets(api: TestClient, world: World) -> None:
    resp = api.put("/v1/auth/anthropic", json={"key": SECRET, "mode": "env"})
    assert resp.json()["mode"] == "env"
    api.post("/v1/boxes", json={"name": "with"})
    api.put("/v1/boxes/with/auth/anthropic")
    api.post("/v1/boxes/with/exec?wait=true", json={"cmd": ["env"]})
    env = world.runtime.execs[-1].env
    assert env["ANTHROPIC_API_KEY"] == SECRET and "ANTHROPIC_BASE_URL" not in env
    bad = api.put("/v1/auth/anthropic", json={"key": SECRET, "mode": "proxy"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


def test_only_attached_boxes_get_the_key(api: TestClient, world: World) -> None:
    api.put("/v1/auth/anthropic", json={"key": SECRET})
    api.post("/v1/boxes", json={"name": "with"})
    api.put("/v1/boxes/with/auth/anthropic")
    # Forgetting the key detaches it everywhere.
    assert api.delete("/v1/auth/anthropic").status_code == 204
    assert api.get("/v1/boxes/with/auth").json() == {"providers": []}


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/v1/auth/acme", {"key": SECRET}, "invalid_request"),
        ("/v1/auth/openai", {"key": "short"}, "invalid_request"),
        ("/v1/auth/openai", {"key": "has a space in it"}, "invalid_request"),
        ("/v1/auth/openai", {"key": SECRET, "base_url": "ftp://x"}, "invalid_request"),
    ],
)
def test_bad_credentials_are_refused(
    api: TestClient, path: str, body: dict[str, str], code: str
) -> None:
    resp = api.put(path, json=body)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == code
    assert SECRET not in resp.text


def test_attach_needs_a_key_and_a_box(api: TestClient) -> None:
    api.post("/v1/boxes", json={"name": "b"})
    resp = api.put("/v1/boxes/b/auth/openai")
    assert resp.status_code == 404 and "paddock auth set openai" in resp.json()["error"]["message"]
    assert api.put("/v1/boxes/nope/auth/openai").status_code == 404
    assert api.delete("/v1/auth/openai").status_code == 404


def test_agents_list_versions_from_the_image_and_keys(api: TestClient, world: World) -> None:
    world.runtime.labels[world.cfg.image.name] = {
        "paddock.agents": "@anthropic-ai/claude-code=2.1.332,@openai/codex=0.169.0,node=22.23.3"
    }
    api.put("/v1/auth/anthropic", json={"key": SECRET})
    agents = {a["name"]: a for a in api.get("/v1/agents").json()["agents"]}
    assert agents["claude"]["version"] == "2.1.332" and agents["claude"]["credentials"]
    assert agents["codex"]["version"] == "0.169.0" and not agents["codex"]["credentials"]
    assert agents["opencode"]["credentials"]  # any of its providers will do
    assert agents["kimi"]["version"] is None and not agents["kimi"]["credentials"]


def test_members_keep_their_own_keys_and_drives(
    api: TestClient, world: World, people: People, anyio_backend: str
) -> None:
    bob = {"Authorization": f"Bearer {world.services.tokens.create_sync('t', people.bob.id)}"}
    owner = {"Authorization": f"Bearer {world.services.tokens.create_sync('t', people.owner.id)}"}
    answers = [api.put("/v1/auth/anthropic", json={"key": SECRET}, headers=bob)]
    answers.append(api.get("/v1/auth", headers=bob))
    answers.append(api.get("/v1/auth", headers=owner))
    answers.append(api.get("/v1/auth"))  # the server's token: the owner's keys
    assert [a.status_code for a in answers] == [200] * 4
    assert all(SECRET not in a.text for a in answers)

    def configured(answer: Response) -> list[str]:
        return [p["provider"] for p in answer.json()["providers"] if p["configured"]]

    assert [configured(a) for a in answers[1:]] == [["anthropic"], [], []]
    assert api.delete("/v1/auth/anthropic", headers=owner).status_code == 404
    # Drives: a member's are theirs; the owner sees whose each is.
    assert api.post("/v1/drives", json={"name": "data"}, headers=bob).status_code == 201
    assert api.post("/v1/drives", json={"name": "data"}, headers=owner).status_code == 201
    [mine] = api.get("/v1/drives", headers=bob).json()["drives"]
    assert (mine["owner"], mine["owner_id"], mine["mine"]) == ("bob", people.bob.id, True)
    everyone = {d["owner"]: d["mine"] for d in api.get("/v1/drives").json()["drives"]}
    assert everyone == {"ada": True, "bob": False}
    refused = api.delete("/v1/drives/data", params={"owner": "ada"}, headers=bob)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert api.delete("/v1/drives/data", params={"owner": "bob"}).status_code == 204
    assert api.delete("/v1/drives/data", headers=bob).status_code == 404
    assert [d["owner"] for d in api.get("/v1/drives").json()["drives"]] == ["ada"]
