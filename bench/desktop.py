"""Desktop benchmark: first desktop request to ready, screenshots, idle memory, and the
desktop layer's size, against the raw engine and a raw VNC grab in the same run.

    /opt/paddock/venv/bin/python -m bench.desktop [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker
from tests.harness import ENGINE_SOCKET, IMAGE, PADDOCK, Server

from paddockd.desktop.rfb import RfbClient

from ._table import Row, median_seconds, print_table

DOCKER = shutil.which("docker") or "docker"
DOCKER_ENV = {**os.environ, "DOCKER_HOST": f"unix://{ENGINE_SOCKET}"}

SCREENSHOT_RUNS = 30


def idle_mib(api: docker.APIClient, container: str) -> float:
    """Memory the box's cgroup holds, less reclaimable page cache (what `docker stats`
    shows)."""
    time.sleep(5)  # let start-up settle
    stats = api.stats(container, stream=False)["memory_stats"]
    cache = stats.get("stats", {}).get("inactive_file", 0)
    return float(stats["usage"] - cache) / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    srv = Server(Path(tempfile.mkdtemp(prefix="paddock-bench-")) / "server")
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    rows: list[Row] = []
    raw = f"pdbench-desk-{uuid.uuid4().hex[:6]}"
    try:
        with srv.client() as c:
            names = iter(f"dk-{i}" for i in range(1000))
            current: list[str] = []

            def new_box() -> None:
                current.append(c.create_box(next(names), box_type="medium").name)

            first = median_seconds(
                lambda: c.desktop_link(current[-1]),
                runs,
                setup=new_box,
                teardown=lambda: (c.delete_box(current.pop(), force=True), srv.deleted()),
            )

            def raw_start() -> None:
                subprocess.run(
                    [
                        "docker",
                        "-H",
                        f"unix://{ENGINE_SOCKET}",
                        "run",
                        "-d",
                        "--name",
                        raw,
                        "--cpus",
                        "2",
                        "--memory",
                        "4g",
                        "--tmpfs",
                        "/run",
                        IMAGE,
                    ],
                    check=True,
                    capture_output=True,
                )

            def raw_desktop() -> None:
                subprocess.run(
                    [
                        "docker",
                        "-H",
                        f"unix://{ENGINE_SOCKET}",
                        "exec",
                        raw,
                        "paddock-desktop",
                        "start",
                    ],
                    check=True,
                    capture_output=True,
                )

            raw_first = median_seconds(
                raw_desktop,
                runs,
                setup=raw_start,
                teardown=lambda: api.remove_container(raw, force=True),
            )
            rows.append(
                Row(
                    "first desktop request -> ready",
                    first,
                    raw_first,
                    "s",
                    "<= 2.5 s (raw: paddock-desktop in docker exec)",
                )
            )

            box = c.create_box("dk-shots", box_type="medium").name
            c.desktop_link(box)
            c.screenshot(box)
            sdk = median_seconds(lambda: c.screenshot(box), SCREENSHOT_RUNS)
            info = c.get_box(box)
            sock = srv.dir / "data" / "boxes" / info.id / "run" / "desktop" / "vnc.sock"

            def vnc_grab() -> None:
                raw_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                raw_sock.connect(str(sock))
                with RfbClient(raw_sock) as vnc:
                    vnc.frame()

            grab = median_seconds(vnc_grab, SCREENSHOT_RUNS)
            rows.append(
                Row("screenshot, warm SDK vs raw VNC grab (no PNG)", sdk, grab, "s", "<= 100 ms")
            )
            cli = median_seconds(
                lambda: subprocess.run(
                    [PADDOCK, "screenshot", box, "-o", "/dev/null"],
                    env=srv.env,
                    check=True,
                    capture_output=True,
                ),
                10,
            )
            rows.append(Row("screenshot, CLI", cli, None, "s", "report"))

            # Computer use: the CLI against the same xdotool command through docker exec.
            session = {
                "DISPLAY": ":1",
                "XDG_RUNTIME_DIR": "/run/paddock-desktop/xdg",
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/paddock-desktop/bus",
            }
            actions = {
                "click": (["click", "640", "400"], ["mousemove", "640", "400", "click", "1"]),
                "type": (["type", "hello"], ["type", "--delay", "8", "--", "hello"]),
                "key": (["key", "Escape"], ["key", "--", "Escape"]),
            }
            for action, (cli_args, xdo_args) in actions.items():
                ours = median_seconds(
                    lambda a=cli_args: subprocess.run(  # type: ignore[misc]
                        [PADDOCK, "desktop", box, *a], env=srv.env, check=True, capture_output=True
                    ),
                    10,
                )

                def raw_xdotool(args: list[str] = xdo_args) -> None:
                    env_args = [f"--env={k}={v}" for k, v in session.items()]
                    subprocess.run(
                        [
                            DOCKER,
                            "exec",
                            "-u",
                            "abc",
                            *env_args,
                            f"paddock-{info.id}",
                            "xdotool",
                            *args,
                        ],
                        env=DOCKER_ENV,
                        check=True,
                        capture_output=True,
                    )

                rows.append(
                    Row(
                        f"desktop {action}, CLI vs xdotool via docker exec",
                        ours,
                        median_seconds(raw_xdotool, 10),
                        "s",
                        "ratio <= 2",
                    )
                )

            plain = c.create_box("dk-plain", box_type="medium").name
            with_desktop = idle_mib(api, f"paddock-{info.id}")
            without = idle_mib(api, f"paddock-{c.get_box(plain).id}")
            rows.append(
                Row(
                    "idle RAM, box with the desktop running",
                    with_desktop,
                    None,
                    "MiB",
                    "<= 150 MiB",
                )
            )
            rows.append(Row("idle RAM, box that never started it", without, None, "MiB", "report"))
        image = api.inspect_image(IMAGE)["Size"] / 1e6
        # The desktop's own layer: the agents' layer is built on top of it since.
        desktop = api.inspect_image("paddock-layer-desktop:latest")["Size"] / 1e6
        below = api.inspect_image("paddock-layer-docker:latest")["Size"] / 1e6
        rows.append(Row("box image size", image, None, "MB", "report"))
        rows.append(Row("desktop layer size", desktop - below, None, "MB", "< 400 MB"))
    finally:
        srv.close()
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_container(raw, force=True)
    print_table(f"desktop (median of {runs}; screenshots: {SCREENSHOT_RUNS})", rows)


if __name__ == "__main__":
    main()
