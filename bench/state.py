"""Box state benchmark: stop (with snapshot), fork, resume, and Docker inside a box,
against the raw engine in the same run.

    /opt/paddock/venv/bin/python -m bench.state [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import docker
from tests.harness import ENGINE_SOCKET, IMAGE, Server

from ._table import Row, median_seconds, print_table

DOCKER = shutil.which("docker") or "docker"
ENV = {**os.environ, "DOCKER_HOST": f"unix://{ENGINE_SOCKET}"}
# The same file rewritten each round on both sides: "N MB changed" since the last stop.
WRITE = "head -c {mb}M /dev/urandom > /config/blob && sync"
BUSYBOX = (
    "for i in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.1; done; "
    "mkdir -p ~/bb && cp /bin/busybox ~/bb/ && printf 'FROM scratch\\nCOPY busybox /bin/busybox\\n"
    'RUN ["/bin/busybox", "--install", "-s", "/bin"]\\n\' > ~/bb/Dockerfile && '
    "docker build -q -t bb ~/bb"
)


def docker_cli(*args: str) -> str:
    return subprocess.run(
        [DOCKER, *args], check=True, capture_output=True, text=True, env=ENV
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs = args.runs
    srv = Server(Path(tempfile.mkdtemp(prefix="paddock-bench-")) / "server")
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    raw = f"pdbench-{uuid.uuid4().hex[:6]}"
    rows: list[Row] = []
    try:
        with srv.client() as c:
            c.create_box("st", ttl=3600)
            docker_cli("run", "-d", "--name", raw, "--cpus", "1", "--memory", "1g", IMAGE)
            for mb in (100, 1024):

                def box_write(mb: int = mb) -> None:
                    c.resume_box("st")
                    c.exec("st", WRITE.format(mb=mb))

                def raw_write(mb: int = mb) -> None:
                    docker_cli("start", raw)
                    docker_cli("exec", raw, "sh", "-c", WRITE.format(mb=mb))

                n = runs if mb < 1024 else max(2, runs // 2)
                p = median_seconds(lambda: c.stop_box("st"), n, setup=box_write)
                tags = iter(range(1000))

                def raw_stop(tags: object = tags) -> None:
                    docker_cli("stop", "-t", "3", raw)
                    docker_cli("commit", raw, f"pdbench-snap:{next(tags)}")  # type: ignore[call-overload]

                r = median_seconds(
                    raw_stop,
                    n,
                    setup=raw_write,
                )
                rows.append(Row(f"stop + snapshot, {mb} MB changed", p, r, "s", "ratio <= 1.2"))

            p = median_seconds(lambda: c.resume_box("st"), runs, setup=lambda: c.stop_box("st"))
            r = median_seconds(
                lambda: docker_cli("start", raw),
                runs,
                setup=lambda: docker_cli("stop", "-t", "3", raw),
            )
            rows.append(Row("resume vs docker start", p, r, "s", "ratio <= 1.5"))

            names = iter(f"fk-{i}" for i in range(1000))
            forks: list[str] = []
            p = median_seconds(
                lambda: forks.append(c.fork_box("st", next(names)).name),
                runs,
                teardown=lambda: c.delete_box(forks.pop(), force=True),
            )
            fork_tags = iter(range(1000))

            def raw_fork() -> None:
                tag = f"pdbench-fork:{next(fork_tags)}"
                docker_cli("commit", raw, tag)
                docker_cli("run", "-d", "--name", f"{raw}-f", "--cpus", "1", "--memory", "1g", tag)

            r = median_seconds(raw_fork, runs, teardown=lambda: docker_cli("rm", "-f", f"{raw}-f"))
            rows.append(
                Row("fork of a running box vs commit + run", p, r, "s", "ratio <= 1.3; report s")
            )

            c.exec("st", BUSYBOX)
            inner = median_seconds(
                lambda: c.exec("st", "docker run --rm --pull never bb true"), runs
            )
            docker_cli("tag", IMAGE, "pdbench-host:latest")
            host = median_seconds(
                lambda: docker_cli(
                    "run", "--rm", "--pull", "never", "--entrypoint", "true", "pdbench-host:latest"
                ),
                runs,
            )
            rows.append(
                Row("docker run --rm inside a box vs on the host", inner, host, "s", "report")
            )
    finally:
        subprocess.run([DOCKER, "rm", "-f", raw, f"{raw}-f"], env=ENV, capture_output=True)
        for image in (
            api.images(name="pdbench-snap")
            + api.images(name="pdbench-fork")
            + api.images(name="pdbench-host")
        ):
            for tag in image.get("RepoTags") or []:
                subprocess.run([DOCKER, "rmi", "-f", tag], env=ENV, capture_output=True)
        srv.close()
    print_table(
        f"Paddock box state vs raw engine (median of {runs} runs; {os.cpu_count()} CPUs)", rows
    )


if __name__ == "__main__":
    main()
