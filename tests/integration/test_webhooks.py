"""Webhooks on a real server, to a receiver on loopback: box events as they happen,
signed, retried after the receiver answers 500, in order per box; a member's webhook gets
only their boxes' events and is never delivered to a private address (loopback)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from paddock import Client
from paddockd.domain.webhooks import verify

from ..harness import Server
from .test_members import create_owner, member_token


class Receiver:
    """An HTTP server on loopback that answers 500 to its first `failing` requests."""

    def __init__(self, failing: int = 0) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.failing = failing
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with lock:
                    owner.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = 500 if owner.failing > 0 else 204
                    owner.failing -= 1
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in list(self.got)]

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture(scope="module")
def hooked(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    server = Server(workdir / "webhooks", upstream_dns=dns_stub.address, webhook_retry_seconds=0.3)
    try:
        create_owner(server)
        yield server, member_token(server, "bob")
    finally:
        server.close()


def _until(done: Callable[[], bool], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, "not delivered in time"
        time.sleep(0.2)


def test_box_events_reach_the_owners_webhook_signed_and_in_order(
    hooked: tuple[Server, str],
) -> None:
    server, _ = hooked
    rx = Receiver(failing=2)
    streamed: list[str] = []
    following = threading.Event()

    def follow() -> None:
        # The same events on /v1/events, as the SDK reads them.
        with server.client() as watcher:
            for kind, data in watcher.follow_events():
                following.set()
                if kind == "box-event" and data.box.name == "hooked":
                    streamed.append(data.type)
                    if data.type == "box.deleted":
                        return

    threading.Thread(target=follow, daemon=True).start()
    assert following.wait(30)
    try:
        with server.client() as owner:
            made = owner.add_webhook(rx.url)
            assert made.secret.startswith("whsec_") and made.webhook.boxes == "all"
            box = owner.create_box("hooked", ttl=600)
            owner.snapshot_box("hooked", label="s1")
            owner.stop_box("hooked")
            owner.delete_box("hooked")
        mine = [box.id]

        def told() -> list[str]:
            return [e["type"] for e in rx.events() if e["box"]["id"] in mine]

        _until(lambda: "box.deleted" in told())
        _until(lambda: "box.deleted" in streamed)
        assert list(dict.fromkeys(streamed)) == list(dict.fromkeys(told()))
        # The first two answers were 500: the event was sent again (the same delivery).
        firsts = [h["paddock-delivery"] for h, _ in rx.got[:3]]
        assert firsts[0] == firsts[1] == firsts[2], firsts
        # In order, each once delivered.
        kinds = list(dict.fromkeys(told()))
        assert kinds[:2] == ["box.created", "box.started"], kinds
        assert (
            kinds.index("snapshot.taken") < kinds.index("box.stopped") < kinds.index("box.deleted")
        )
        stopped = next(e for e in rx.events() if e["type"] == "box.stopped")
        assert stopped["data"]["reason"] == "user" and stopped["box"]["name"] == "hooked"
        labels = [e["data"]["label"] for e in rx.events() if e["type"] == "snapshot.taken"]
        assert "s1" in labels
        for headers, body in rx.got:
            assert verify(made.secret, body, headers["paddock-signature"])
            assert headers["paddock-event"] == json.loads(body)["type"]
        with server.client() as owner:
            log = owner.webhook_deliveries(made.webhook.id, limit=200)
        first = log[-1]
        assert first.state == "delivered" and first.attempts == 3 and first.status == 204
        # The CLI shows the same.
        listed = server.cli("webhook", "ls", check=True).stdout
        assert made.webhook.id in listed and rx.url in listed
        shown = server.cli("webhook", "log", made.webhook.id, check=True).stdout
        assert "box.deleted" in shown and "delivered" in shown
        tested = server.cli("webhook", "test", made.webhook.id)
        assert tested.returncode == 0 and "answered 204" in tested.stdout
    finally:
        rx.close()
        with server.client() as owner:
            for hook in owner.list_webhooks():
                owner.delete_webhook(hook.id)


def test_a_members_webhook_gets_only_their_boxes_and_no_private_address(
    hooked: tuple[Server, str],
) -> None:
    server, bob = hooked
    rx = Receiver()
    try:
        with Client(server.url, bob) as member:
            made = member.add_webhook(rx.url, ["box.created", "box.deleted"])
            assert made.webhook.boxes == "own"
            # Loopback is no address for a member's webhook (paddockd is root on the host).
            tried = member.test_webhook(made.webhook.id)
            assert not tried.delivered and "not a public address" in (tried.error or "")
            mine = member.create_box("bobs-hooked", ttl=600)
        with server.client() as owner:
            theirs = owner.create_box("owners-hooked", ttl=600)
            assert [h.id for h in owner.list_webhooks()] == [made.webhook.id]  # sees all
            owner.delete_box(theirs.id, force=True)
        with Client(server.url, bob) as member:
            member.delete_box(mine.id, force=True)

            def queued() -> list[Any]:
                return member.webhook_deliveries(made.webhook.id)

            _until(lambda: {"box.created", "box.deleted"} <= {d.event_type for d in queued()})
            boxes = {d.box_id for d in queued() if d.event_type != "webhook.test"}
            assert boxes == {mine.id}  # never the owner's box
            assert all(d.state != "delivered" for d in queued())
            assert all("not a public address" in (d.error or "") for d in queued() if d.attempts)
        # Another's webhook is not theirs to see or remove.
        with server.client() as owner:
            own = owner.add_webhook(rx.url)
        with Client(server.url, bob) as member:
            with pytest.raises(Exception, match="no webhook"):
                member.delete_webhook(own.webhook.id)
            assert [h.id for h in member.list_webhooks()] == [made.webhook.id]
        # Nothing of bob's reached loopback.
        assert all(json.loads(body)["box"]["id"] != mine.id for _, body in rx.got)
    finally:
        rx.close()
        with server.client() as owner:
            for hook in owner.list_webhooks():
                owner.delete_webhook(hook.id)


def test_a_name_the_policy_refuses_is_told_as_egress_refused(hooked: tuple[Server, str]) -> None:
    server, _ = hooked
    rx = Receiver()
    try:
        with server.client() as owner:
            made = owner.add_webhook(rx.url, ["egress.refused"])
            box = owner.create_box("walled", ttl=600)
            owner.set_network("walled", "deny-all")
            # Paddock's resolver refuses it: no query leaves the machine.
            for _ in range(3):
                owner.exec("walled", "getent hosts refused-name.example || true")

        def refused() -> list[dict[str, Any]]:
            return [e for e in rx.events() if e["box"]["id"] == box.id]

        _until(lambda: any(e["data"].get("target") == "refused-name.example" for e in refused()))
        time.sleep(1)
        told = [e for e in refused() if e["data"].get("target") == "refused-name.example"]
        assert len(told) == 1, told  # once a minute per destination
        assert told[0]["type"] == "egress.refused" and told[0]["data"]["kind"] == "dns"
        assert {e["type"] for e in rx.events()} == {"egress.refused"}
        with server.client() as owner:
            owner.delete_webhook(made.webhook.id)
    finally:
        server.cli("rm", "-f", "walled")
        rx.close()
