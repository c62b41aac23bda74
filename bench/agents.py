"""Agent runs benchmark: how long `paddock prompt` takes before the agent's first request
reaches the model API, against starting the same agent with `docker exec` in the same
box, and the agents layer's size. The model is the tests' fake API in the on-machine test
internet (tests/fakemodel.py); nothing leaves the machine.

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

from ._table import Row, print_table

PORT = 8080
KEY = "sk-ant-bench-0123456789"
BELOW = "paddock-layer-desktop:latest"  # the image without the agents layer


def first_request_after(log: Path, started: float, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry["t"] > started and "/v1/messages" in entry["path"]:
                return float(entry["t"]) - started
        time.sleep(0.02)
    raise RuntimeError("the agent's request never reached the fake API")


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
            c.set_credential("anthropic", KEY, base_url=f"http://{ALLOWED}:{PORT}")
            box = c.create_box("ag", box_type="medium")
            cid = f"paddock-{box.id}"
            paddock, raw = [], []
            for _ in range(runs):
                started = time.time()
                run = c.start_run("ag", "Say something.", agent="claude")
                paddock.append(first_request_after(log, started))
                for _event in c.follow_run(run.id):
                    pass
                started = time.time()
                subprocess.run(
                    [
                        "docker",
                        "-H",
                        f"unix://{ENGINE_SOCKET}",
                        "exec",
                        "-u",
                        "abc",
                        "-e",
                        f"ANTHROPIC_API_KEY={KEY}",
                        "-e",
                        f"ANTHROPIC_BASE_URL=http://{ALLOWED}:{PORT}",
                        "-e",
                        "DISABLE_AUTOUPDATER=1",
                        "-e",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                        "-w",
                        "/config",
                        cid,
                        "claude",
                        "-p",
                        "--dangerously-skip-permissions",
                        "Say something.",
                    ],
                    check=True,
                    capture_output=True,
                )
                raw.append(first_request_after(log, started))
            rows.append(
                Row(
                    "prompt -> first model request (claude)",
                    statistics.median(paddock),
                    statistics.median(raw),
                    "s",
                    "report (raw: docker exec claude -p)",
                )
            )
        size = (api.inspect_image(IMAGE)["Size"] - api.inspect_image(BELOW)["Size"]) / 1e6
        rows.append(Row("agents layer size", size, None, "MB", "report"))
    finally:
        srv.close()
        stub.close()
        internet.close()
    print_table(f"agents (median of {runs})", rows)


if __name__ == "__main__":
    main()
