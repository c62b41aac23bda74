"""Agent runs benchmark: how long `paddock prompt` takes before the agent's first request
reaches the model API, with the key behind the credential gateway (the default) and with
the key in the box (--mode env), against starting the same agent with `docker exec` in the
same box; a model's event stream read in the box through the gateway and straight from
the model; and the agents layer's size. The model is the tests' fake API in the on-machine
test internet (tests/fakemodel.py); nothing leaves the machine.

    /opt/paddock/venv/bin/python -m bench.agents [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
from tests.dnsstub import DnsStub
from tests.harness import ENGINE_SOCKET, IMAGE, Server
from tests.netlab import ALLOWED, TestInternet

from paddockd.domain.agents import AGENTS
from paddockd.domain.credentials import PROVIDERS
from paddockd.domain.runs import headless

from ._table import Row, print_table

PORT = 8080
KEY = "sk-bench-0123456789"
BASE = f"http://{ALLOWED}:{PORT}"
BELOW = "paddock-layer-desktop:latest"  # the image without the agents layer
# agent: (provider, its base URL, the path of its model requests)
AGENTS_MEASURED = {
    "claude": ("anthropic", BASE, "/v1/messages"),
    "kimi": ("moonshot", f"{BASE}/v1", "/chat/completions"),
}


def first_request_after(log: Path, started: float, path: str, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry["t"] > started and path in entry["path"]:
                return float(entry["t"]) - started
        time.sleep(0.02)
    raise RuntimeError("the agent's request never reached the fake API")


def raw_exec(cid: str, agent: str, provider: str, base_url: str) -> list[str]:
    """The same agent, command line and environment as a Paddock run, by `docker exec`."""
    p = PROVIDERS[provider]
    env = AGENTS[agent].adapt({p.key_env: KEY, p.base_url_env: base_url})
    cmd = headless(agent, "Say something.", None, False, env)
    flags = [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
    return ["docker", "-H", f"unix://{ENGINE_SOCKET}", "exec", "-u", "abc", *flags,
            "-w", "/config", cid, *cmd]  # fmt: skip


EVENTS = 20000


def stream_rows(srv: Server, c: object, runs: int) -> list[Row]:
    """A model's event stream of EVENTS events read by curl in the box, through the
    gateway (key swapped, the stream masked) and straight from the model (events/s)."""
    from paddock import Client

    assert isinstance(c, Client)
    c.set_credential("anthropic", KEY, base_url=BASE)
    c.attach_credential("ag", "anthropic")
    curl = "curl -s -o /dev/null -w '%{time_total}' -H \"x-api-key: $ANTHROPIC_API_KEY\" "
    through = curl + f"'http://{srv.gateway}/anthropic/v1/stream?events={EVENTS}'"
    straight = curl + f"'{BASE}/v1/stream?events={EVENTS}'"
    timed: dict[str, list[float]] = {"gateway": [], "direct": []}
    for _ in range(runs):
        for name, line in (("gateway", through), ("direct", straight)):
            done = c.exec("ag", ["bash", "-c", line])
            timed[name].append(EVENTS / float(done.stdout))
    # One model request's round trip, 30 each way, alternating, in one shell in the box.
    post = (
        "curl -s -o /dev/null -w '%{time_total}\\n' -X POST -H \"x-api-key: $ANTHROPIC_API_KEY\" "
        '-H \'content-type: application/json\' -d \'{"model":"m","max_tokens":1,'
        '"messages":[{"role":"user","content":"hi"}]}\' '
    )
    loop = (
        f"for i in $(seq 30); do {post}'http://{srv.gateway}/anthropic/v1/messages'; "
        f"{post}'{BASE}/v1/messages'; done"
    )
    times = [float(t) for t in c.exec("ag", ["bash", "-c", loop]).stdout.split()]
    return [
        Row(
            "model request round trip in the box",
            statistics.median(times[0::2]),
            statistics.median(times[1::2]),
            "s",
            "report (raw: straight to the model)",
        ),
        Row(
            "model stream in the box (events/s)",
            statistics.median(timed["gateway"]),
            statistics.median(timed["direct"]),
            "ev/s",
            ">= 0.95x (raw: straight to the model)",
            higher_is_better=True,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    internet, stub = TestInternet(work), DnsStub()
    log = work / "fakemodel.jsonl"
    log.touch()
    script = Path(__file__).parents[1] / "tests" / "fakemodel.py"
    internet.spawn(sys.executable, str(script), str(PORT), str(log))
    srv = Server(work / "server", upstream_dns=stub.address)
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    rows: list[Row] = []
    try:
        time.sleep(1)
        with srv.client() as c:
            box = c.create_box("ag", box_type="medium")
            cid = f"paddock-{box.id}"
            for agent, (provider, base_url, path) in AGENTS_MEASURED.items():
                firsts: dict[str, list[float]] = {"gateway": [], "env": [], "raw": []}
                for _ in range(runs):
                    # A B A B: gateway, env, raw, each run in turn.
                    for mode in ("gateway", "env"):
                        c.set_credential(provider, KEY, base_url=base_url, mode=mode)
                        started = time.time()
                        run = c.start_run("ag", "Say something.", agent=agent)
                        firsts[mode].append(first_request_after(log, started, path))
                        for _event in c.follow_run(run.id):
                            pass
                    started = time.time()
                    subprocess.run(
                        raw_exec(cid, agent, provider, base_url), check=True, capture_output=True
                    )
                    firsts["raw"].append(first_request_after(log, started, path))
                gateway, env, raw = (
                    statistics.median(firsts[m]) for m in ("gateway", "env", "raw")
                )
                rows.append(
                    Row(
                        f"prompt -> first model request ({agent})",
                        gateway,
                        raw,
                        "s",
                        f"report (raw: docker exec {agent})",
                    )
                )
                rows.append(
                    Row(
                        f"  gateway vs key in the box ({agent})",
                        gateway,
                        env,
                        "s",
                        "<= 1.05x (raw: --mode env)",
                    )
                )
            rows += stream_rows(srv, c, runs)
        size = (api.inspect_image(IMAGE)["Size"] - api.inspect_image(BELOW)["Size"]) / 1e6
        rows.append(Row("agents layer size", size, None, "MB", "report"))
    finally:
        srv.close()
        stub.close()
        internet.close()
    print_table(f"agents (median of {runs})", rows)


if __name__ == "__main__":
    main()
