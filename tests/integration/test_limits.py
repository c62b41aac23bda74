"""Limits seen from inside a box (real engine, LXCFS): nproc, free, cpuinfo, uptime."""

from __future__ import annotations

import json
import shutil

import docker
import pytest

from .conftest import ENGINE_SOCKET, Server

# The test server starts LXCFS itself when it is installed but not running.
pytestmark = pytest.mark.skipif(
    shutil.which("lxcfs") is None, reason="LXCFS is not installed (apt-get install lxcfs)"
)

PROBE = (
    "nproc; free -m | awk '/^Mem:/ {print $2}'; grep -c ^processor /proc/cpuinfo; "
    "cut -d. -f1 /proc/uptime; cat /sys/devices/system/cpu/online"
)


def test_a_small_box_sees_its_own_cpu_memory_and_uptime(server: Server, box: str) -> None:
    with server.client() as c:
        assert c.get_box(box).type == "small"  # 1 CPU, 1 GiB
        got = c.exec(box, ["sh", "-c", PROBE])
        assert got.exit_code == 0, got.stderr
        nproc, mem_mb, processors, uptime, online = got.stdout.split()
        assert nproc == "1" and processors == "1" and online == "0"
        assert 1000 <= int(mem_mb) <= 1024
        assert int(uptime) < 120  # the box's, not the host's
        # The views survive a stop and resume (same container, binds made again).
        c.stop_box(box)
        c.resume_box(box)
        again = c.exec(box, ["sh", "-c", PROBE]).stdout.split()
        assert again[:3] == ["1", mem_mb, "1"]
        cid = f"paddock-{c.get_box(box).id}"
    host = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}").inspect_container(cid)
    assert len(host["HostConfig"]["CpusetCpus"].split(",")) == 1
    assert host["Config"]["Labels"]["paddock.views"] == "lxcfs"


def test_status_has_no_lxcfs_problem(server: Server) -> None:
    with server.client() as c:
        assert not [p for p in c.status().problems if "LXCFS" in p]


def test_stats_of_a_running_and_a_stopped_box(server: Server, box: str) -> None:
    with server.client() as c:
        c.exec(box, "head -c 30000000 /dev/zero > /config/fill && (sleep 30 &)")
        got = c.box_stats(box)
        assert got.state == "running" and got.cpu_percent is not None
        assert got.memory_limit_bytes == 1024 << 20
        assert 0 < (got.memory_bytes or 0) < got.memory_limit_bytes
        assert (got.disk_bytes or 0) >= 30_000_000
        assert got.disk_quota_bytes == 2 * 10 << 30  # the small type's size: root, Docker data
        assert got.pids_limit == 1024 and 1 <= (got.pids or 0) <= 1024
        listed = json.loads(server.cli("stats", "--json", check=True).stdout)
        assert box in {s["name"] for s in listed}
        c.stop_box(box)
        stopped = c.box_stats(box)
        assert stopped.state == "stopped" and stopped.cpu_percent is None
        table = server.cli("stats", box, check=True).stdout
        assert table.split("\n")[0].split() == ["BOX", "STATE", "CPU", "MEMORY", "DISK", "PIDS"]
        assert table.split("\n")[1].split()[:3] == [box, "stopped", "-"]
        status = c.status()
        assert status.data_root_free_bytes and status.data_root_total_bytes
        assert "disk:" in server.cli("status", check=True).stdout
