"""The credential gateway on the real engine and rules: provider keys and secrets bound to
hosts reach the test internet's servers only through it, and the real values are never in
a box (environment, files, snapshot, fork, run log), whatever the box does with its
placeholders.

The test internet here speaks HTTPS with a CA of the tests' own (tests/testca.py), which
this paddockd is told to trust and the boxes are not: a box sees the hosts' own
certificates only where the gateway passes TLS through."""

from __future__ import annotations

import base64
import json
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ..dnsstub import DnsStub
from ..harness import e2b_python_env
from ..netlab import ALLOWED, OTHER, TestInternet
from ..testca import TestCA
from .conftest import Server
from .test_members import create_owner, member_token

KEY = f"sk-ant-real-{uuid.uuid4().hex}"
VALUE = f"ghp_real{uuid.uuid4().hex}"
MODEL_PORT = 8443


class Lab:
    """The test internet with its HTTPS servers: the fake model on 198.18.1.1:8443 and an
    echo server on port 443 for allowed.test and other.test."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / f"gateway-{uuid.uuid4().hex[:6]}"
        self.ca = TestCA(self.dir / "ca")
        self.net = TestInternet(workdir)
        self.model_log = self.dir / "model.jsonl"
        self.echo_log = self.dir / "echo.jsonl"
        self.model_log.touch()
        self.echo_log.touch()
        tests = Path(__file__).parents[1]
        cert, key = self.ca.issue(ALLOWED)
        self.net.spawn(
            sys.executable, str(tests / "fakemodel.py"), str(MODEL_PORT), str(self.model_log),
            str(cert), str(key),
        )  # fmt: skip
        hosts = [
            f"{n}={':'.join(map(str, self.ca.issue(n)))}" for n in ("allowed.test", "other.test")
        ]
        self.net.spawn(sys.executable, str(tests / "tlsecho.py"), str(self.echo_log), *hosts)
        for port in (MODEL_PORT, 443):
            _wait_for(ALLOWED, port)

    def model(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.model_log.read_text().splitlines() if line]

    def echoed(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.echo_log.read_text().splitlines() if line]

    def close(self) -> None:
        self.net.close()


def _wait_for(host: str, port: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {host}:{port}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def lab(workdir: Path) -> Iterator[Lab]:
    made = Lab(workdir)
    yield made
    made.close()


@pytest.fixture(scope="module")
def gw(engine: None, workdir: Path, dns_stub: DnsStub, lab: Lab) -> Iterator[Server]:
    srv = Server(
        workdir / f"gw-{uuid.uuid4().hex[:6]}",
        upstream_dns=dns_stub.address,
        network_gateway_ca_file=str(lab.ca.pem),
    )
    srv.cli(
        "auth", "set", "anthropic", "--from-stdin", "--base-url",
        f"https://{ALLOWED}:{MODEL_PORT}", stdin=KEY.encode(), check=True,
    )  # fmt: skip
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def boxes(gw: Server) -> Iterator[tuple[str, str]]:
    """Two boxes of one user, each with the key attached."""
    names = (f"gwa-{uuid.uuid4().hex[:4]}", f"gwb-{uuid.uuid4().hex[:4]}")
    for name in names:
        gw.cli("new", "--name", name, "--auth", "anthropic", check=True)
    yield names
    for name in names:
        gw.cli("rm", "--force", name)


def found_in(gw: Server, box: str, value: str) -> list[str]:
    """How many processes' environments hold `value` in the box, then the files that do
    where the box's users and agents write (homes, temporary files, settings: the whole
    disk takes half a minute to read). The scan gets it in two halves: whole, it would
    be in the scan's own environment."""
    half = len(value) // 2
    scan = (
        'K="$K1$K2"; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -cF "$K"; '
        'grep -rlsF "$K" /config /root /home /tmp /var/tmp /etc /run /opt /srv || true'
    )
    env = ["-e", f"K1={value[:half]}", "-e", f"K2={value[half:]}"]
    return gw.cli("exec", "-u", "root", *env, box, "--", "bash", "-c", scan).stdout.split()


def env_of(gw: Server, box: str, name: str) -> str:
    return gw.sh(box, f'printf %s "${name}"')


def test_an_agent_gets_the_key_through_the_gateway_and_the_box_never_does(
    gw: Server, lab: Lab, boxes: tuple[str, str]
) -> None:
    box = boxes[0]
    before = len(lab.model())
    done = gw.cli("prompt", box, "--agent", "claude", "Say something.")
    assert done.returncode == 0 and "FAKE-ANSWER" in done.stdout, done.stderr
    sent = [r for r in lab.model()[before:] if str(r["path"]).startswith("/v1/messages")]
    assert sent and all(r["key"] == KEY for r in sent)  # over TLS, the certificate checked
    placeholder = env_of(gw, box, "ANTHROPIC_API_KEY")
    assert placeholder.startswith("sk-paddock-")
    # Not in any process's environment, nor anywhere on the box's disk.
    assert found_in(gw, box, KEY) == ["0"]
    runs = json.loads(gw.cli("runs", box, "--json", check=True).stdout)
    log = gw.cli("runs", "show", runs[0]["id"], check=True)
    assert KEY not in log.stdout + log.stderr
    # Its snapshot's fork holds the placeholder, which the gateway refuses from there.
    fork = f"{box}-f"
    gw.cli("fork", box, "--name", fork, check=True)
    try:
        assert found_in(gw, fork, KEY) == ["0"]
        status = gw.sh(
            fork,
            "curl -s -o /dev/null -w '%{http_code}' -X POST http://$GW/anthropic/v1/messages "
            f"-H 'x-api-key: {placeholder}' -d '{{}}'".replace("$GW", gw.gateway),
        )
        assert status == "403"
    finally:
        gw.cli("rm", "--force", fork)
    uses = json.loads(gw.cli("auth", "log", "--json", check=True).stdout)
    assert any(u["outcome"] == "used" and u["box"] == box and u["status"] == 200 for u in uses)
    assert any(u["reason"] == "another box's placeholder" and u["box"] == fork for u in uses)


def test_placeholders_go_nowhere_else(gw: Server, lab: Lab, boxes: tuple[str, str]) -> None:
    a, b = boxes
    mine = env_of(gw, a, "ANTHROPIC_API_KEY")
    url = f"http://{gw.gateway}/anthropic/v1/messages"
    ask = "curl -s -o /dev/null -w '%{http_code}' -X POST " + url + " -H 'x-api-key: KEY' -d 'BODY'"
    before = len(lab.model())
    assert gw.sh(b, ask.replace("KEY", mine).replace("BODY", "{}")) == "403"  # a's, from b
    # In the body rather than a header: the body goes as it is, the key in the header only.
    body = json.dumps(
        {"model": "x", "max_tokens": 1, "messages": [{"role": "user", "content": mine}]}
    )
    gw.sh(a, ask.replace("KEY", mine).replace("BODY", body))
    sent = lab.model()[before:]
    assert len(sent) == 1 and sent[0]["key"] == KEY and KEY not in json.dumps(sent[0]["body"])
    assert mine in json.dumps(sent[0]["body"])
    # Sent to another host: it is a placeholder there, nothing more.
    gw.sh(a, f"curl -s -m 5 http://{OTHER}/ -H 'x-api-key: {mine}' >/dev/null || true")
    gw.cli("auth", "detach", a, "anthropic", check=True)
    try:
        assert gw.sh(a, ask.replace("KEY", mine).replace("BODY", "{}")) == "403"
    finally:
        gw.cli("auth", "attach", a, "anthropic", check=True)
    assert len(lab.model()) == before + 1


def test_the_gateway_is_all_of_the_host_a_box_reaches(gw: Server, boxes: tuple[str, str]) -> None:
    a = boxes[0]
    gwip = gw.gateway
    config = gw.config.read_text()
    direct = [
        int(line.split("=")[1])
        for line in config.splitlines()
        if "gateway" in line and "port" in line
    ]
    for port in (*direct, gw.port):
        code = gw.sh(
            a, f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://{gwip}:{port}/ || true"
        )
        assert code == "000", (port, code)  # refused by the rules: no answer at all
    answer = gw.sh(a, f"curl -s http://{gwip}/elsewhere/v1")
    assert json.loads(answer)["error"]["code"] == "not_found"


def test_a_deny_all_box_with_a_key_reaches_only_its_provider(gw: Server, lab: Lab) -> None:
    name = f"gwd-{uuid.uuid4().hex[:4]}"
    gw.cli("new", "--name", name, "--network", "deny-all", check=True)
    try:
        ask = (
            f"curl -s -m 10 -o /dev/null -w '%{{http_code}}' -X POST "
            f'http://{gw.gateway}/anthropic/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY" '
            "-d '{}' || true"
        )
        assert gw.sh(name, ask) == "401"  # no key attached: the gateway says so at once
        gw.cli("auth", "attach", name, "anthropic", check=True)
        assert gw.sh(name, ask) == "200"
        assert (
            gw.sh(name, f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' https://{ALLOWED}/ || true")
            == "000"
        )
    finally:
        gw.cli("rm", "--force", name)


def test_a_secret_is_swapped_for_its_hosts_only(
    gw: Server, lab: Lab, boxes: tuple[str, str]
) -> None:
    a, b = boxes
    gw.cli("secret", "set", "TOKEN", "--from-stdin", "--host", "allowed.test",
           stdin=VALUE.encode(), check=True)  # fmt: skip
    gw.cli("secret", "attach", a, "TOKEN", check=True)
    placeholder = env_of(gw, a, "TOKEN")
    assert placeholder.startswith("paddock-secret-") and VALUE not in placeholder
    before = len(lab.echoed())
    # To the bound host: the value goes, and what the host echoes back is masked.
    echoed = gw.sh(a, 'curl -sS https://allowed.test/api -H "Authorization: Bearer $TOKEN"')
    assert VALUE not in echoed and "*" * len(VALUE) in echoed
    # node's fetch (NODE_EXTRA_CA_CERTS) and git's Basic credentials too.
    gw.sh(a, "node -e \"fetch('https://allowed.test/node',{headers:{'x-token':process.env.TOKEN}})"
             ".then(r=>process.exit(r.status===200?0:1))\"")  # fmt: skip
    gw.sh(a, "printf '#!/bin/sh\\necho \"$TOKEN\"\\n' > ~/ask && chmod +x ~/ask && "
             "GIT_ASKPASS=~/ask GIT_TERMINAL_PROMPT=0 git ls-remote "
             "https://x-access-token@allowed.test/repo.git >/dev/null 2>&1 || true")  # fmt: skip
    # To another host: untouched, and its own certificate is what the box sees.
    verbose = gw.sh(
        a, 'curl -skv https://other.test/x -H "Authorization: Bearer $TOKEN" 2>&1 >/dev/null'
    )
    assert lab.ca.cn in verbose
    # A Host that is not the connection's own: refused before it leaves.
    code = gw.sh(a, "curl -s -o /dev/null -w '%{http_code}' https://allowed.test/y "
                    '-H "Host: other.test" -H "Authorization: Bearer $TOKEN"')  # fmt: skip
    assert code == "421"
    # From a box it is not attached to: no swap, whoever's placeholder it is.
    gw.sh(b, f"curl -sk https://allowed.test/b -H 'Authorization: Bearer {placeholder}' >/dev/null")
    seen = {str(r["path"]): r for r in lab.echoed()[before:]}
    assert set(seen) >= {"/api", "/node", "/x", "/b"} and "/y" not in seen
    assert seen["/api"]["headers"]["authorization"] == f"Bearer {VALUE}"  # type: ignore[index]
    assert seen["/node"]["headers"]["x-token"] == VALUE  # type: ignore[index]
    assert seen["/x"]["headers"]["authorization"] == f"Bearer {placeholder}"  # type: ignore[index]
    assert seen["/b"]["headers"]["authorization"] == f"Bearer {placeholder}"  # type: ignore[index]
    basic = [r for p, r in seen.items() if p.startswith("/repo.git")]
    creds = [
        base64.b64decode(str(r["headers"]["authorization"]).split()[1]).decode()  # type: ignore[index]
        for r in basic
        if "authorization" in r["headers"]
    ]  # type: ignore[operator]
    assert f"x-access-token:{VALUE}" in creds
    assert VALUE not in gw.sh(
        a, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'", user="root"
    )
    uses = json.loads(gw.cli("secret", "log", "TOKEN", "--json", check=True).stdout)
    assert {u["host"] for u in uses if u["outcome"] == "used"} == {"allowed.test"}
    gw.cli("secret", "detach", a, "TOKEN", check=True)
    gw.sh(
        a,
        f"curl -sk https://allowed.test/after -H 'Authorization: Bearer {placeholder}' >/dev/null || true",
    )
    after = [r for r in lab.echoed() if r["path"] == "/after"]
    assert all(VALUE not in json.dumps(r) for r in after)


def test_e2b_network_rules_set_a_secrets_header_for_their_host_only(gw: Server, lab: Lab) -> None:
    """E2B's Secrets API and `network.rules`: the sandbox asks that requests to a host
    carry a header naming a secret; the gateway sets it with the secret's current value,
    which never enters the box, and no other host (or another user) gets it."""
    e2b = pytest.importorskip("e2b")
    first, second = f"e2b-first-{uuid.uuid4().hex}", f"e2b-second-{uuid.uuid4().hex}"
    name = f"gh-{uuid.uuid4().hex[:6]}"
    with e2b_python_env(gw):
        made = e2b.Secret.create(name, first, metadata={"team": "a"})
        assert (made.name, made.version, made.metadata) == (name, 1, {"team": "a"})
        assert e2b.Secret.exists(name) and e2b.Secret.get_info(made.secret_id).name == name
        rules = {
            "allowed.test": [
                {"transform": {"headers": {"Authorization": f"Bearer {e2b.Secret.fill(name)}"}}}
            ]
        }
        sbx = e2b.Sandbox.create(
            network={
                "allow_out": ["allowed.test", "other.test"],
                "deny_out": ["0.0.0.0/0"],
                "rules": rules,
            }
        )
        try:
            assert sbx.get_info().network["rules"]["allowed.test"]  # type: ignore[index]
            before = len(lab.echoed())
            echoed = sbx.commands.run(
                "curl -sS https://allowed.test/e2b-rule -H 'Authorization: Bearer forged'"
            ).stdout
            assert first not in echoed and "*" * len(first) in echoed
            sbx.commands.run("curl -skS https://other.test/e2b-other >/dev/null")
            e2b.Secret.update(name, second)
            assert e2b.Secret.get_info(name).version == 2
            # The rules outlive a restart of paddockd (read again as the gateway starts).
            gw.kill()
            gw.start()
            sbx.commands.run("curl -sS https://allowed.test/e2b-updated >/dev/null")
            seen = {str(r["path"]): r["headers"] for r in lab.echoed()[before:]}
            assert seen["/e2b-rule"]["authorization"] == f"Bearer {first}"  # type: ignore[index]
            assert "authorization" not in seen["/e2b-other"]  # type: ignore[operator]
            assert seen["/e2b-updated"]["authorization"] == f"Bearer {second}"  # type: ignore[index]
            inside = sbx.commands.run(
                "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; env", user="root"
            ).stdout
            assert first not in inside and second not in inside
            uses = json.loads(gw.cli("secret", "log", "--json", check=True).stdout)
            assert {u["host"] for u in uses if u["name"] == f"e2b:{name}"} == {"allowed.test"}
            # A value is never given back, whatever is asked.
            listed = e2b.Secret.list().next_items()
            assert name in [s.name for s in listed]
            assert second not in httpx_get(gw, "/e2b/secrets") + httpx_get(
                gw, f"/e2b/secrets/{name}"
            )
            # A secret destroyed: the request is refused, never sent without it.
            assert e2b.Secret.destroy(name) and not e2b.Secret.exists(name)
            code = sbx.commands.run(
                "curl -s -o /dev/null -w '%{http_code}' https://allowed.test/e2b-gone"
            ).stdout
            assert code == "403"
            # update_network checks its rules' secrets as create does (the box owner's).
            with pytest.raises(e2b.SandboxException, match="do not exist"):
                sbx.update_network({"rules": rules})
            # update_network without rules: the host is the box's own again.
            e2b.Secret.create(name, first)
            sbx.update_network({"allow_out": ["allowed.test"], "deny_out": ["0.0.0.0/0"]})
            sbx.commands.run("curl -skS https://allowed.test/e2b-none >/dev/null")
        finally:
            sbx.kill()
        seen = {str(r["path"]): r["headers"] for r in lab.echoed()[before:]}
        assert "/e2b-gone" not in seen
        assert "authorization" not in seen["/e2b-none"]  # type: ignore[operator]
        # Another user can neither see the secret nor name it in a rule.
        create_owner(gw)
        token = member_token(gw, f"e2bsec{uuid.uuid4().hex[:4]}")
        assert name not in [s.name for s in e2b.Secret.list(api_key=token).next_items()]
        with pytest.raises(e2b.SandboxException, match="do not exist"):
            e2b.Sandbox.create(api_key=token, network={"rules": rules})
        e2b.Secret.destroy(name)


def httpx_get(gw: Server, path: str) -> str:
    return httpx.get(gw.url + path, headers={"X-API-Key": gw.token}, timeout=30).text
