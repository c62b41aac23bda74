"""SSH benchmark: `ssh paddock-BOX true` (OpenSSH through `paddock ssh-proxy`) against
`docker exec BOX true` on the box's own container, and scp of 50 MB into the box against
`paddock push` and `docker exec -i ... cat` of the same file, in the same run.

    /opt/paddock/venv/bin/python -m bench.ssh [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from tests.harness import PADDOCK, Server

from ._table import Row, median_seconds, print_table
from .core import DOCKER, DOCKER_ENV

SIZE = 50 << 20


def run(*argv: str, env: dict[str, str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, env=env, stdin=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    srv = Server(work / "server")
    rows: list[Row] = []
    try:
        env = srv.env
        srv.cli("new", "--name", "sshbench", "--ttl", "3600", check=True)
        config = str(srv.cli_config.parent / "ssh" / "config")
        srv.cli("ssh-config", "sshbench", check=True)
        with srv.client() as c:
            container = f"paddock-{c.get_box('sshbench').id}"
        ssh = ["ssh", "-F", config, "paddock-sshbench"]
        run(*ssh, "true", env=env)  # warm: the first session makes the host key
        rows.append(
            Row(
                "ssh BOX true (a new connection each)",
                median_seconds(lambda: run(*ssh, "true", env=env), args.runs),
                median_seconds(
                    lambda: run(DOCKER, "exec", container, "true", env=DOCKER_ENV), args.runs
                ),
                "s",
                "report (raw: docker exec)",
            )
        )
        blob = work / "blob.bin"
        blob.write_bytes(os.urandom(SIZE))
        runs = max(3, args.runs // 3)
        scp = median_seconds(
            lambda: run(
                "scp", "-F", config, str(blob), "paddock-sshbench:/config/blob.bin", env=env
            ),
            runs,
        )
        push = median_seconds(
            lambda: run(
                PADDOCK, "push", "sshbench", str(blob), "--to", "/config/blob2.bin", env=env
            ),
            runs,
        )

        def raw_copy() -> None:
            # The raw engine's stream of the same bytes (`docker cp` cannot write into a
            # box with an identity of its own).
            with blob.open("rb") as f:
                subprocess.run(
                    [DOCKER, "exec", "-i", container, "sh", "-c", "cat > /config/blob3.bin"],
                    check=True, stdin=f, env=DOCKER_ENV, capture_output=True,
                )  # fmt: skip

        cp = median_seconds(raw_copy, runs)
        mb = SIZE / 1e6
        rows.append(
            Row(
                "scp 50 MB in, throughput",
                mb / scp,
                mb / cp,
                "MB/s",
                "report (raw: docker exec -i cat)",
                True,
            )
        )
        rows.append(
            Row(
                "paddock push 50 MB, throughput",
                mb / push,
                mb / cp,
                "MB/s",
                "report (raw: docker exec -i cat)",
                True,
            )
        )
        started = time.perf_counter()
        run(*ssh, "sha256sum /config/blob.bin", env=env)
        rows.append(
            Row(
                "ssh BOX sha256sum 50 MB (in the box)",
                time.perf_counter() - started,
                None,
                "s",
                "report",
            )
        )
    finally:
        srv.close()
    print_table(f"ssh (median of {args.runs})", rows)


if __name__ == "__main__":
    main()
