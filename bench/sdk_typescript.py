"""TypeScript SDK benchmark: `exec true` on a warm box through `@paddock/sdk` against docker-py's
`exec_run` on the same box's container, in the same run.

    /opt/paddock/venv/bin/python -m bench.sdk_typescript [--runs 50] [--rounds 3]

Rounds alternate the two sides on one box, so a machine busy with something else for a while
weighs on both; the table shows the medians of all samples, and each round's ratio.

Needs the box engine and image (./install.sh), Node.js 20+ and npm. Starts a paddockd of its
own; builds sdk/typescript first if it is not built.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import docker
from docker.models.containers import Container
from tests.harness import ENGINE_SOCKET, ROOT, Server

from ._table import Row, print_table

SDK = ROOT / "sdk" / "typescript"

# Makes the box "warm" (or finds it), warms up (one client, its connection kept alive, a few
# calls first), then times `runs` calls; prints the box's id and the samples.
NODE_BENCH = """
import { Client, NotFound } from "@paddock/sdk";
const runs = Number(process.argv[1]);
const c = new Client();
const { id, name: box } = await c.getBox("warm").catch((e) => {
  if (e instanceof NotFound) return c.createBox({ name: "warm", ttl: 3600 });
  throw e;
});
for (let i = 0; i < 5; i++) await c.exec(box, ["true"]);
const samples = [];
for (let i = 0; i < runs; i++) {
  const start = performance.now();
  const r = await c.exec(box, ["true"]);
  samples.push((performance.now() - start) / 1000);
  if (r.exit_code !== 0) throw new Error("exec true failed");
}
c.close();
console.log(JSON.stringify({ id, samples }));
"""


def build_sdk() -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed (Node.js 20 or newer)")
    if not (SDK / "node_modules").is_dir():
        subprocess.run(
            [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"], cwd=SDK, check=True
        )
    subprocess.run([npm, "run", "build", "--silent"], cwd=SDK, check=True)


def typescript_samples(srv: Server, runs: int) -> tuple[list[float], str]:
    # Run from inside the package, so `@paddock/sdk` resolves to this checkout's build.
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE_BENCH, str(runs)],
        cwd=SDK,
        env=srv.env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the TypeScript side failed:\n{done.stderr}")
    out = json.loads(done.stdout)
    return out["samples"], out["id"]


def box_container(box_id: str) -> Container:
    """The box's container, straight through the engine."""
    engine = docker.DockerClient(base_url=f"unix://{ENGINE_SOCKET}")
    (info,) = engine.api.containers(filters={"label": f"paddock.box={box_id}"})
    return engine.containers.get(info["Id"])


def docker_samples(container: Container, runs: int) -> list[float]:
    """docker-py's `exec_run` (create, start, inspect), warmed up as the SDK side is."""
    samples = []
    for i in range(5 + runs):
        start = time.perf_counter()
        container.exec_run(["true"], user="abc")
        if i >= 5:
            samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50, help="timed calls per side and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build_sdk()
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-ts-"))
    srv = Server(work / "server")
    try:
        ts: list[float] = []
        raw: list[float] = []
        container: Container | None = None
        for n in range(args.rounds):
            ts_round, box_id = typescript_samples(srv, args.runs)
            if container is None:
                container = box_container(box_id)
            raw_round = docker_samples(container, args.runs)
            ratio = statistics.median(ts_round) / statistics.median(raw_round)
            print(f"round {n + 1}: ratio {ratio:.2f}")
            ts += ts_round
            raw += raw_round
        print_table(
            f"exec true on a warm box, median of {len(ts)} ({args.rounds} rounds)",
            [
                Row(
                    "TypeScript SDK vs docker-py exec_run",
                    statistics.median(ts),
                    statistics.median(raw),
                    "s",
                    "ratio <= 1.5",
                )
            ],
        )
    finally:
        srv.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
