"""Preview URL overhead: a request through paddockd's preview proxy vs the same request
made directly to the app inside the box, same machine, same run.

    /opt/paddock/venv/bin/python -m bench.preview [--requests 300]

The raw side runs in the box itself (a new connection per request to 127.0.0.1, as the
proxy makes one per request); the paddock side is a client on the host, keep-alive to
paddockd, through the path form. The difference is what the proxy adds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from tests.harness import Server

from ._table import Row, print_table

APP = Path(__file__).resolve().parents[1] / "tests" / "integration" / "data" / "preview_app.py"
PORT = 8080
IN_BOX = f"""
import http.client, json, statistics, sys, time
samples = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", {PORT})
    conn.request("GET", "/headers")
    conn.getresponse().read()
    conn.close()
    samples.append(time.perf_counter() - start)
print(json.dumps(statistics.median(samples)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paddock-bench-") as tmp:
        srv = Server(Path(tmp))
        try:
            srv.cli("new", "--name", "web", "--ttl", "3600", check=True)
            srv.cli("push", "web", str(APP), "--to", "/opt/preview_app.py", check=True)
            srv.cli(
                "exec", "-d", "web", "--", "python3", "/opt/preview_app.py", str(PORT), check=True
            )
            with srv.client() as c:
                url = c.create_preview("web", PORT, public=True).url
            with httpx.Client(timeout=30) as client:
                deadline = time.monotonic() + 30
                while client.get(url + "headers").status_code != 200:
                    assert time.monotonic() < deadline, "the app did not answer"
                    time.sleep(0.2)
            # The same client library on both sides (http.client), kept alive to paddockd.
            path = urlsplit(url).path + "headers"
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            samples = []
            for _ in range(args.requests):
                start = time.perf_counter()
                conn.request("GET", path)
                answer = conn.getresponse()
                answer.read()
                assert answer.status == 200
                samples.append(time.perf_counter() - start)
            conn.close()
            through = statistics.median(samples)
            ran = srv.cli(
                "exec", "web", "--", "python3", "-c", IN_BOX, str(args.requests), check=True
            )
            direct = float(json.loads(ran.stdout))
        finally:
            srv.close()
    print_table(
        f"Preview URL, {args.requests} GET requests, median",
        [
            Row("GET through the preview vs direct in the box", through, direct, "s"),
            Row("overhead added by the proxy", through - direct, None, "s", "<= 2 ms"),
        ],
    )


if __name__ == "__main__":
    main()
