"""Reading a box's figures from cgroup v1 and v2 files laid out as the kernel does."""

from __future__ import annotations

from pathlib import Path

import pytest

from paddockd.runtime import cgroups


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_v1_figures(tmp_path: Path) -> None:
    box = "paddock/abc"
    _write(
        tmp_path,
        {
            f"memory/{box}/memory.usage_in_bytes": "300\n",
            f"memory/{box}/memory.limit_in_bytes": "1073741824\n",
            f"memory/{box}/memory.stat": "cache 5\ntotal_inactive_file 100\n",
            f"cpuacct/{box}/cpuacct.usage": "5000\n",
            f"pids/{box}/pids.current": "7\n",
            f"pids/{box}/pids.max": "1024\n",
        },
    )
    lines = f"4:memory:/{box}\n2:cpu,cpuacct:/{box}\n8:pids:/{box}\n0::/{box}\n"
    _write(tmp_path, {"proc/1/cgroup": lines})
    got = cgroups.sample(1, tmp_path, tmp_path / "proc")
    assert (got.cpu_ns, got.memory_bytes, got.memory_limit_bytes) == (5000, 200, 1073741824)
    assert (got.pids, got.pids_limit) == (7, 1024)
    # A pid kept from an earlier look is read only while it is still that container's.
    again = cgroups.sample(1, tmp_path, tmp_path / "proc", expect="abc")
    assert (again.cpu_ns, again.memory_bytes) == (got.cpu_ns, got.memory_bytes)
    with pytest.raises(OSError, match="not in a cgroup of def"):
        cgroups.sample(1, tmp_path, tmp_path / "proc", expect="def")


def test_v2_figures_and_no_limits(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "box/cpu.stat": "usage_usec 3\nuser_usec 2\n",
            "box/memory.current": "50\n",
            "box/memory.max": "max\n",
            "box/memory.stat": "inactive_file 10\n",
            "box/pids.current": "2\n",
            "box/pids.max": "max\n",
        },
    )
    _write(tmp_path, {"proc/1/cgroup": "0::/box\n"})
    got = cgroups.sample(1, tmp_path, tmp_path / "proc")
    assert (got.cpu_ns, got.memory_bytes, got.memory_limit_bytes) == (3000, 40, None)
    assert (got.pids, got.pids_limit) == (2, None)


def test_cpu_percent_is_of_one_cpu() -> None:
    a = cgroups.Sample(0, 0, 0, None, 0, None)
    b = cgroups.Sample(200_000_000, 300_000_000, 0, None, 0, None)
    assert cgroups.cpu_percent(a, b) == 150.0


def test_docker_size_strings() -> None:
    from paddockd.runtime.docker import parse_size

    assert parse_size("10240M") == 10240 << 20
    assert parse_size("10G") == 10 << 30
    assert parse_size("1.5GiB") == 3 << 29
    assert parse_size("4096") == 4096
