"""Docker inside a box (profile userns), and the isolation that must hold around it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker

from ..harness import wait_for
from .conftest import ENGINE_SOCKET, Server

# No registry is reachable (and tests must not try): inner images are built FROM scratch
# with the box's static busybox, and every run says --pull never.
BUSYBOX_IMAGE = r"""
for i in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
set -e
mkdir -p ~/bb && cp /bin/busybox ~/bb/
printf 'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nCMD ["sh"]\n' > ~/bb/Dockerfile
docker build -q -t bb ~/bb >/dev/null
"""


WAIT_FOR_DOCKER = "for i in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.1; done; "


def container(server: Server, box: str) -> dict[str, object]:
    box_id = json.loads(server.cli("show", box, "--json", check=True).stdout)["id"]
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    return dict(api.inspect_container(f"paddock-{box_id}"))


def test_box_root_is_an_unprivileged_host_uid(server: Server, box: str) -> None:
    pid = container(server, box)["State"]["Pid"]  # type: ignore[index]
    uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
    assert uid >= 100000, uid


def test_host_config_never_privileged(server: Server, box: str) -> None:
    host = container(server, box)["HostConfig"]
    assert host["Privileged"] is False  # type: ignore[index]
    assert set(host["CapAdd"] or []) <= {"SYS_ADMIN", "NET_ADMIN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"}  # type: ignore[index]
    opts = " ".join(host["SecurityOpt"] or [])  # type: ignore[index]
    assert "unconfined" not in opts and "seccomp=" in opts
    assert host["UsernsMode"] in ("", None)  # type: ignore[index]  # the engine's remap, not "host"
    assert host["Runtime"] == "paddock-runc"  # type: ignore[index]


def test_root_in_a_box_cannot_touch_the_host(server: Server, box: str) -> None:
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    probes = {
        "core_pattern": "echo '|/tmp/x' > /proc/sys/kernel/core_pattern",
        "mknod": "mknod /tmp/sda b 8 0",
        "cgroup mount": "mkdir -p /tmp/cg && mount -t cgroup -o memory cgroup /tmp/cg",
        "raise memory limit": "echo 99999999999 > /sys/fs/cgroup/memory/memory.limit_in_bytes",
        "umount /proc/sys then write": "umount /proc/sys 2>/dev/null; echo '|/tmp/y' > /proc/sys/kernel/core_pattern",
    }
    for what, script in probes.items():
        done = server.cli("exec", "-u", "root", box, "--", "sh", "-c", script)
        assert done.returncode != 0, f"{what} succeeded inside a box"
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def test_docker_build_run_ports_networks_compose_and_limits(server: Server, box: str) -> None:
    server.sh(box, BUSYBOX_IMAGE)
    assert server.sh(box, "docker run --rm --pull never bb echo inner") == "inner\n"
    limit = server.sh(
        box,
        "docker run --rm --pull never --memory 64m bb cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
    )
    assert limit.strip() == str(64 * 1024 * 1024)
    published = server.sh(
        box,
        "docker run -d --pull never --name web -p 8080:80 bb httpd -f -p 80 -h /bin >/dev/null; sleep 1; wget -qO- localhost:8080/busybox | head -c 4 | tail -c 3; docker rm -f web >/dev/null",
    )
    assert published == "ELF"
    dns = server.sh(
        box,
        "docker network create n1 >/dev/null; docker run -d --pull never --name srv --network n1 bb httpd -f -p 80 -h /bin >/dev/null; docker run --rm --pull never --network n1 bb wget -qO- srv:80/busybox | head -c 4 | tail -c 3; docker rm -f srv >/dev/null; docker network rm n1 >/dev/null",
    )
    assert dns == "ELF"
    compose = (
        "mkdir -p ~/c && cd ~/c && printf 'services:\\n  web:\\n    image: bb\\n    pull_policy: never\\n"
        "    command: httpd -f -p 80 -h /bin\\n  probe:\\n    image: bb\\n    pull_policy: never\\n"
        '    depends_on: [web]\\n    command: sh -c "sleep 1; wget -qO- web:80/busybox >/dev/null"\\n\''
        " > docker-compose.yml && docker compose up --abort-on-container-exit --exit-code-from probe >/dev/null 2>&1;"
        " code=$?; docker compose down >/dev/null 2>&1; exit $code"
    )
    assert server.cli("exec", box, "--", "bash", "-c", compose).returncode == 0


def test_dockerd_starts_on_first_use_and_with_containers_to_restart(server: Server) -> None:
    name = f"lazy-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--ttl", "600", check=True)
    try:
        running = "pgrep -x dockerd >/dev/null && echo up || echo down"
        time_for_services = "sleep 2; "  # what an eager start would have needed
        assert server.sh(name, time_for_services + running, user="root") == "down\n"
        assert server.sh(name, "stat -c %G:%a /var/run/docker.sock") == "docker:660\n"
        server.sh(name, BUSYBOX_IMAGE)  # the first client starts it and is served
        assert server.sh(name, running, user="root") == "up\n"
        server.sh(
            name,
            "docker run -d --pull never --restart unless-stopped --name keep bb sleep 1d",
        )
        server.cli("stop", name, check=True)
        server.cli("resume", name, check=True)
        # Nobody touches the socket: the container comes back because dockerd started.
        assert (
            server.sh(
                name,
                "for i in $(seq 100); do [ -S /var/run/docker.sock ] && pgrep -x dockerd "
                ">/dev/null && docker ps -q -f name=keep | grep -q . && echo back && break;"
                " sleep 0.1; done",
                user="root",
            )
            == "back\n"
        )
    finally:
        server.cli("rm", "--force", name, check=True)


def test_var_lib_docker_is_kept_but_never_in_a_snapshot(server: Server, box: str) -> None:
    server.cli("snapshot", box, "--name", "before-images", check=True)
    server.sh(box, BUSYBOX_IMAGE)
    server.cli("stop", box, check=True)
    server.cli("resume", box, check=True)
    assert "bb" in server.sh(
        box, WAIT_FOR_DOCKER + "docker images --format '{{.Repository}}'"
    )  # kept
    server.cli("restore", box, "--snapshot", "before-images", check=True)
    assert "bb" in server.sh(
        box, WAIT_FOR_DOCKER + "docker images --format '{{.Repository}}'"
    )  # not rolled back
    fork = f"k-{uuid.uuid4().hex[:6]}"
    server.cli("fork", box, "--name", fork, check=True)
    try:
        assert "bb" not in server.sh(
            fork, WAIT_FOR_DOCKER + "docker images --format '{{.Repository}}'"
        )
    finally:
        server.cli("rm", "--force", fork, check=True)
    box_id = json.loads(server.cli("show", box, "--json", check=True).stdout)["id"]
    server.cli("rm", "--force", box, check=True)
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    # `rm` answers at once; the container and the volume go just after (docs/cli.md).
    wait_for(
        lambda: (
            f"paddock-box-{box_id}-docker"
            not in [v["Name"] for v in api.volumes().get("Volumes") or []]
        ),
        30,
        "the box's Docker volume to go",
    )


def test_status_and_show_report_the_profile(server: Server, box: str) -> None:
    status = json.loads(server.cli("status", "--json", check=True).stdout)
    assert status["engine"]["profile"] == "userns"
    assert json.loads(server.cli("show", box, "--json", check=True).stdout)["profile"] == "userns"
