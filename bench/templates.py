"""Templates benchmark: a box made from a template against one made from the box image
(create to exec-ready), both against `docker run -d` + `docker exec` of the box image in the
same run; and what a template that adds 1 GB costs on the engine's disk, once built and
with boxes made from it.

    /opt/paddock/venv/bin/python -m bench.templates [--runs 5] [--boxes 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from tests.harness import IMAGE, Server

from paddock import Client

from ._table import Row, print_table
from .state import DISKS, docker_cli, used_bytes

ADDS = "head -c 1024M /dev/urandom > /opt/blob && sync"


def new_and_exec(c: Client, template: str | None) -> float:
    started = time.perf_counter()
    box = c.create_box(template=template, ttl=600)
    c.exec(box.name, ["true"])
    took = time.perf_counter() - started
    c.delete_box(box.name, force=True)
    return took


def raw_run_and_exec() -> float:
    name = f"pdbench-{uuid.uuid4().hex[:6]}"
    started = time.perf_counter()
    docker_cli("run", "-d", "--name", name, "--cpus", "1", "--memory", "1g", IMAGE)
    docker_cli("exec", name, "true")
    took = time.perf_counter() - started
    docker_cli("rm", "-f", name)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--boxes", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    srv = Server(work / "server", disk_mbps_per_cpu=0, capacity_cpus=64)
    rows: list[Row] = []
    try:
        with srv.client() as c:
            context = work / "context"
            context.mkdir()
            (context / "Dockerfile").write_text(f"FROM paddock-box\nRUN {ADDS}\n")
            before = used_bytes()
            c.build_template("gig", context, timeout=1800)
            for event in c.follow_template_build("gig"):
                if event.get("status") == "failed":
                    raise SystemExit(f"the build failed: {event.get('message')}")
            built = used_bytes()
            made = [c.create_box(template="gig", ttl=600) for _ in range(args.boxes)]
            with_boxes = used_bytes()
            for box in made:
                c.delete_box(box.name, force=True)
            gib = 1 << 30
            once = (built - before) / gib
            shared = (with_boxes - before) / gib
            rows.append(Row("template adding 1 GB, engine disk", once, None, "GiB", "<= 1.1"))
            boxes = f"  ... and {args.boxes} boxes made from it"
            rows.append(Row(boxes, shared, None, "GiB", "<= 1.1 (shared)"))
            times: dict[str, list[float]] = {"template": [], "image": [], "raw": []}
            for _ in range(args.runs):  # A B A B
                times["template"].append(new_and_exec(c, "gig"))
                times["image"].append(new_and_exec(c, None))
                times["raw"].append(raw_run_and_exec())
            tpl, img, raw = (statistics.median(times[k]) for k in ("template", "image", "raw"))
            rows.append(
                Row(
                    "new --template + exec, cold",
                    tpl,
                    img,
                    "s",
                    "<= 1.1x (raw: from the box image)",
                )
            )
            rows.append(
                Row(
                    "new (box image) + exec, cold", img, raw, "s", "report (raw: docker run + exec)"
                )
            )
            c.delete_template("gig")
    finally:
        srv.close()
    print_table(f"templates (median of {args.runs}; disks under {DISKS})", rows)


if __name__ == "__main__":
    main()
