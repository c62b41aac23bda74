"""/metrics on a real server, read by prometheus-client's own text parser: the owner's
only; counters and gauges move with what happens; no label a caller chose."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from paddock import Client

from ..harness import Server
from .test_members import bearer, owner_and_bob


@pytest.fixture(scope="module")
def measured(engine: None, workdir: Path, dns_stub: Any) -> Iterator[tuple[Server, str]]:
    with owner_and_bob(workdir / "metrics", dns_stub) as both:
        yield both


def scrape(server: Server) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    got = httpx.get(server.url + "/metrics", headers=bearer(server.token), timeout=30)
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(got.text)
        for s in family.samples
    }


def value(
    seen: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return seen.get((name, frozenset(labels.items())), 0.0)


def test_metrics_move_with_what_happens(measured: tuple[Server, str]) -> None:
    server, bob = measured
    before = scrape(server)
    with Client(server.url, bob) as member:
        member.create_box("measured", box_type="small", ttl=600)
        member.exec("measured", "true")
        member.exec("measured", "true")
    after = scrape(server)
    created = dict(method="POST", route="/v1/boxes", status="201")
    assert (
        value(after, "paddock_api_calls_total", **created)
        == value(before, "paddock_api_calls_total", **created) + 1
    )
    exec_ = dict(method="POST", route="/v1/boxes/{ref}/exec", status="200")
    assert (
        value(after, "paddock_api_calls_total", **exec_)
        - value(before, "paddock_api_calls_total", **exec_)
        == 2
    )
    assert value(after, "paddock_api_call_seconds_count", method="POST", route="/v1/boxes") >= 1
    assert value(after, "paddock_boxes", state="running", type="small") >= 1
    assert value(after, "paddock_capacity_memory_mb", kind="claimed") >= 1024
    assert value(after, "paddock_engine_up") == 1
    assert value(after, "paddockd_process_resident_memory_bytes") > 10 << 20
    assert value(after, "paddock_background_runs_total", job="reconcile") >= 1
    # No label value a caller chose: a box's name never appears.
    assert not any("measured" in v for (_, labels) in after for _, v in labels)
    with Client(server.url, bob) as member:
        member.delete_box("measured", force=True)


def test_the_metrics_are_the_owners(measured: tuple[Server, str]) -> None:
    server, bob = measured
    assert httpx.get(server.url + "/metrics", timeout=30).status_code == 401
    assert httpx.get(server.url + "/metrics", headers=bearer(bob), timeout=30).status_code == 403
    # Paths nobody routes, and methods nobody uses, are one label, whatever they are.
    for i in range(5):
        httpx.get(f"{server.url}/no-such-{i}", timeout=30)
        httpx.request(f"NOSUCH{i}", f"{server.url}/v1/boxes", timeout=30)
    seen = scrape(server)
    calls = [dict(labels) for (name, labels) in seen if name == "paddock_api_calls_total"]
    routes, methods = {c["route"] for c in calls}, {c["method"] for c in calls}
    assert not any(r.startswith("/no-such") for r in routes) and "other" in routes
    assert not any(m.startswith("NOSUCH") for m in methods)  # "other", if they get through


def test_a_metrics_token_reads_the_metrics_and_nothing_else(measured: tuple[Server, str]) -> None:
    import json

    server, bob = measured
    made = json.loads(
        server.cli("token", "create", "prom", "--metrics", "--json", check=True).stdout
    )
    assert made["scope"] == "metrics"
    scraper = made["token"]
    got = httpx.get(server.url + "/metrics", headers=bearer(scraper), timeout=30)
    assert got.status_code == 200 and "paddock_boxes" in got.text
    # Anywhere else it is no token: the API, the E2B API, a change.
    for method, path, headers in [
        ("GET", "/v1/boxes", bearer(scraper)),
        ("GET", "/v1/status", bearer(scraper)),
        ("POST", "/v1/tokens", bearer(scraper)),
        ("GET", "/e2b/sandboxes", {"X-API-Key": scraper}),
    ]:
        answer = httpx.request(method, server.url + path, headers=headers, json={}, timeout=30)
        assert answer.status_code == 401, (method, path, answer.text)
    listed = server.cli("token", "ls", check=True).stdout
    assert "prom (metrics only)" in listed
    # A member cannot make one.
    refused = httpx.post(
        server.url + "/v1/tokens",
        headers=bearer(bob),
        json={"name": "mine", "scope": "metrics"},
        timeout=30,
    )
    assert refused.status_code == 403
    server.cli("token", "rm", made["id"], check=True)
    assert (
        httpx.get(server.url + "/metrics", headers=bearer(scraper), timeout=30).status_code == 401
    )
