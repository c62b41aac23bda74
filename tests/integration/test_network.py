"""Egress policy on real boxes, real nftables, and an on-machine test internet. "Blocked"
is asserted by what the listeners received, never only by the client's error."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid

import pytest

from ..dnsstub import DnsStub
from ..netlab import ALLOWED, METADATA, OTHER, WILD, TestInternet
from .conftest import Server


def connect(server: Server, box: str, host: str, port: int = 80) -> tuple[bool, float, str]:
    """(succeeded, seconds, output) of one HTTP request from the box."""
    script = f"exec 3<>/dev/tcp/{host}/{port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"
    started = time.monotonic()
    done = server.cli("exec", box, "--", "timeout", "8", "bash", "-c", script)
    return (
        done.returncode == 0,
        time.monotonic() - started,
        done.stdout + f"[rc={done.returncode} {done.stderr}]",
    )


def assert_reaches(server: Server, box: str, host: str, internet: TestInternet) -> None:
    """A connection that a policy change just allowed goes through at once (no retries:
    the rules are in place when the API answers)."""
    ok, seconds, out = connect(server, box, host)
    if ok:
        return
    import subprocess

    table = "paddock_" + server.instance.replace("-", "_")
    rules = subprocess.run(
        ["nft", "list", "table", "inet", table], capture_output=True, text=True
    ).stdout
    pytest.fail(
        f"{host} still refused ({seconds:.1f}s): {out!r}\n{rules}\n{internet.connections()}"
    )


def set_policy(server: Server, box: str, *args: str) -> None:
    server.cli("network", box, *args, check=True)


def test_allow_all_reaches_the_test_internet(
    server: Server, box: str, internet: TestInternet
) -> None:
    internet.reset()
    assert_reaches(server, box, ALLOWED, internet)
    assert len(internet.connections(ALLOWED)) >= 1


def test_metadata_is_refused_under_every_mode(
    server: Server, box: str, internet: TestInternet
) -> None:
    internet.reset()
    # An allowlist cannot even name it (docs/security.md).
    named = server.cli("network", box, "allow", "169.254.0.0/16")
    assert named.returncode == 1 and "cloud metadata" in named.stderr, named.stderr
    for args in (["allow-all"], ["deny-all"], ["allow", f"{ALLOWED}/32"]):
        set_policy(server, box, *args)
        ok, seconds, _ = connect(server, box, METADATA)
        assert not ok and seconds < 5, args
    assert internet.connections(METADATA) == []
    set_policy(server, box, "allow-all")


def test_deny_all_refuses_new_connections_fast_but_open_ones_finish(
    server: Server, box: str, internet: TestInternet
) -> None:
    internet.reset()
    # A slow download (3 s) is under way when the policy changes.
    server.sh(
        box,
        f"(exec 3<>/dev/tcp/{ALLOWED}/81; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3 > /tmp/stream) >/dev/null 2>&1 & sleep 0.5",
    )
    set_policy(server, box, "deny-all")
    ok, seconds, _ = connect(server, box, OTHER)
    assert not ok and seconds < 3  # refused, not timed out
    assert internet.connections(OTHER) == []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        streamed = server.cli("exec", box, "--", "cat", "/tmp/stream", check=True).stdout
        if "chunk-5" in streamed:
            break
        time.sleep(0.5)
    assert "chunk-5" in streamed
    set_policy(server, box, "allow-all")


def test_allowlist_admits_exactly_what_it_lists(
    server: Server, box: str, internet: TestInternet
) -> None:
    internet.reset()
    set_policy(server, box, "allow", "198.18.1.0/24")
    assert_reaches(server, box, ALLOWED, internet)
    assert not connect(server, box, OTHER)[0]
    set_policy(server, box, "allow", "--add", f"{OTHER}/32")
    assert_reaches(server, box, OTHER, internet)
    set_policy(server, box, "allow", "--remove", "198.18.1.0/24")
    assert not connect(server, box, ALLOWED)[0]
    # In order of first arrival (a retried check may have reached a listener twice).
    seen = list(dict.fromkeys(c["local"] for c in internet.connections()))
    assert seen == [ALLOWED, OTHER]
    shown = json.loads(server.cli("network", box, "--json", check=True).stdout)
    assert shown == {"mode": "allowlist", "allow": [f"{OTHER}/32"]}
    set_policy(server, box, "allow-all")


def test_boxes_cannot_reach_each_other_or_the_host(
    server: Server, box: str, internet: TestInternet
) -> None:
    other = f"peer-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", other, check=True)
    try:
        server.cli(
            "exec",
            other,
            "--",
            "bash",
            "-c",
            "nohup python3 -m http.server 9000 > /tmp/http.log 2>&1 & sleep 1",
            check=True,
        )
        peer_ip = server.cli("exec", other, "--", "hostname", "-I", check=True).stdout.split()[0]
        ok, _, _ = connect(server, box, peer_ip, 9000)
        assert not ok
        assert (
            "GET" not in server.cli("exec", other, "--", "cat", "/tmp/http.log", check=True).stdout
        )
    finally:
        server.cli("rm", "--force", other)
    # A listener on the host's side of the bridge: nothing may arrive.
    received: list[str] = []
    listener = socket.socket()
    listener.bind((server.gateway, 0))
    listener.listen(4)
    listener.settimeout(6)

    def accept() -> None:
        try:
            conn, peer = listener.accept()
            received.append(peer[0])
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    ok, _, _ = connect(server, box, server.gateway, listener.getsockname()[1])
    thread.join()
    listener.close()
    assert not ok and received == []
    ok, _, _ = connect(server, box, "10.213.0.1", server.port)  # paddockd itself
    assert not ok


def test_policy_survives_stop_resume_fork_and_a_flushed_ruleset(
    server: Server, box: str, internet: TestInternet
) -> None:
    set_policy(server, box, "allow", "198.18.1.0/24")
    server.cli("stop", box, check=True)
    server.cli("resume", box, check=True)
    assert_reaches(server, box, ALLOWED, internet)
    assert not connect(server, box, OTHER)[0]
    fork = f"nf-{uuid.uuid4().hex[:6]}"
    server.cli("fork", box, "--name", fork, check=True)
    try:
        assert json.loads(server.cli("network", fork, "--json", check=True).stdout)["allow"] == [
            "198.18.1.0/24"
        ]
        assert not connect(server, fork, OTHER)[0]
    finally:
        server.cli("rm", "--force", fork)
    import subprocess

    subprocess.run(["nft", "flush", "ruleset"], check=True)
    time.sleep(4)  # the test server reconciles every 2 s
    internet.reset()
    assert not connect(server, box, OTHER)[0]
    assert internet.connections(OTHER) == []
    set_policy(server, box, "allow-all")


def lookup(server: Server, box: str, name: str) -> tuple[list[str], float]:
    """(addresses, seconds) of a name looked up in the box the way programs do."""
    started = time.monotonic()
    done = server.cli("exec", box, "--", "getent", "ahostsv4", name)
    addresses = sorted({line.split()[0] for line in done.stdout.splitlines() if line.strip()})
    return addresses, time.monotonic() - started


def log_events(server: Server, box: str, address: str, verdict: str) -> list[dict[str, object]]:
    """The box's egress log once it holds a connection to `address` with that verdict
    (connections are read from the rules every second)."""
    deadline = time.monotonic() + 10
    while True:
        out = server.cli("network", "log", box, "--json", check=True).stdout
        events = [json.loads(line) for line in out.splitlines() if line.strip()]
        if time.monotonic() > deadline or any(
            e["kind"] == "connect" and e["address"] == address and e["verdict"] == verdict
            for e in events
        ):
            return events


def test_domain_allowlist_admits_the_names_and_what_they_resolved_to(
    server: Server, box: str, internet: TestInternet, dns_stub: DnsStub
) -> None:
    internet.reset()
    set_policy(server, box, "allow", "allowed.test", "*.wild.test")
    assert lookup(server, box, "allowed.test")[0] == [ALLOWED]
    assert_reaches(server, box, "allowed.test", internet)
    assert_reaches(server, box, "a.wild.test", internet)
    assert lookup(server, box, "deep.b.wild.test")[0] == [WILD]
    # A name not on the list does not resolve, at once, and never leaves paddockd.
    asked = len(dns_stub.asked)
    addresses, seconds = lookup(server, box, "other.test")
    assert addresses == [] and seconds < 2
    assert "other.test" not in dns_stub.asked[asked:]
    assert lookup(server, box, "wild.test")[0] == []  # a wildcard is for names below
    # By address: only what an allowed name resolved to.
    ok, seconds, _ = connect(server, box, OTHER)
    assert not ok and seconds < 3
    assert {c["local"] for c in internet.connections()} == {ALLOWED, WILD}
    set_policy(server, box, "allow-all")


def test_dns_goes_only_to_paddocks_resolver(
    server: Server, box: str, internet: TestInternet
) -> None:
    internet.reset()
    for mode in (["allow-all"], ["allow", "allowed.test", "198.18.2.0/24"]):
        set_policy(server, box, *mode)
        ok, seconds, _ = connect(server, box, OTHER, 53)  # DNS over TCP elsewhere
        assert not ok and seconds < 3, mode
        server.sh(box, f"for i in 1 2 3; do echo query > /dev/udp/{OTHER}/53; done; sleep 0.5")
        assert lookup(server, box, "allowed.test")[0] == [ALLOWED]  # the resolver works
    assert internet.connections(OTHER) == [] and internet.connections("udp") == []
    set_policy(server, box, "allow-all")


def test_egress_log_and_suggested_allowlist(server: Server, internet: TestInternet) -> None:
    box = f"learn-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", box, check=True)
    try:
        assert_reaches(server, box, "allowed.test", internet)
        assert_reaches(server, box, OTHER, internet)
        for name in ("a.wild.test", "b.wild.test", "c.wild.test"):
            lookup(server, box, name)
        events = log_events(server, box, OTHER, "allowed")
        assert {"kind": "dns", "verdict": "allowed", "name": "allowed.test"}.items() <= next(
            e for e in events if e["name"] == "allowed.test"
        ).items()
        conns = {
            (e["address"], e["port"], e["verdict"], e["name"])
            for e in events
            if e["kind"] == "connect"
        }
        assert (ALLOWED, 80, "allowed", "allowed.test") in conns
        assert (OTHER, 80, "allowed", "") in conns
        suggested = server.cli("network", "suggest", box, check=True).stdout.split()
        assert suggested == ["allowed.test", "*.wild.test", f"{OTHER}/32"]
        # Lock it down to the suggestion: what it used still works, the rest is refused
        # and logged as such.
        set_policy(server, box, "allow", *suggested)
        assert_reaches(server, box, "allowed.test", internet)
        assert lookup(server, box, "other.test")[0] == []
        set_policy(server, box, "allow", "allowed.test")
        assert not connect(server, box, OTHER)[0]
        events = log_events(server, box, OTHER, "refused")
        refused = {
            (e["kind"], e["name"] or e["address"]) for e in events if e["verdict"] == "refused"
        }
        assert ("dns", "other.test") in refused and ("connect", OTHER) in refused
    finally:
        server.cli("rm", "--force", box)


def test_follow_streams_new_entries(server: Server, box: str, internet: TestInternet) -> None:
    import subprocess

    follower = subprocess.Popen(
        [*server.cli_argv("network", "log", box, "--follow", "--json")],
        env=server.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1)
        lookup(server, box, "allowed.test")
        assert follower.stdout is not None
        names = [json.loads(follower.stdout.readline())["name"] for _ in range(1)]
        assert names == ["allowed.test"]
    finally:
        follower.terminate()
        follower.wait(timeout=5)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["allow", "198.18.0.1/16"], 1, "host bits"),
        (["allow", "fd00::/8"], 1, "IPv6"),
        (["allow", "999.1.1.1"], 1, "invalid"),
        # Usage mistakes the CLI catches before sending exit 2, as argparse's do.
        (["allow"], 2, "deny-all"),
        (["allow", "--remove", "198.18.0.0/15"], 1, "not in the allowlist"),
        (["allow", "exa_mple.com"], 1, "invalid allowlist entry"),
        (["allow", "*.test"], 1, "invalid allowlist entry"),
        (["sometimes"], 2, "invalid choice"),
    ],
)
def test_bad_policies_change_nothing(
    server: Server, box: str, args: list[str], code: int, message: str
) -> None:
    set_policy(server, box, "deny-all")
    done = server.cli("network", box, *args)
    assert done.returncode == code and message in done.stderr, done.stderr
    assert json.loads(server.cli("network", box, "--json", check=True).stdout)["mode"] == "deny-all"


def test_policy_survives_an_engine_restart(
    server: Server, box: str, internet: TestInternet
) -> None:
    """Last in this module: every box on the machine's engine stops and comes back."""
    import subprocess

    from .conftest import PADDOCKD

    set_policy(server, box, "allow", "allowed.test")
    subprocess.run([PADDOCKD, "engine", "stop"], check=True, capture_output=True)
    subprocess.run([PADDOCKD, "engine", "start"], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while server.cli("exec", box, "--", "true").returncode != 0:
        assert time.monotonic() < deadline, "the box did not come back after the engine restart"
        time.sleep(1)
    internet.reset()
    assert_reaches(server, box, "allowed.test", internet)
    assert not connect(server, box, OTHER)[0]
    assert internet.connections(OTHER) == []
