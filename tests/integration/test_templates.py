"""Templates on the real engine: a Dockerfile built in a build box (a Debian package made
here and installed from the context, a file copied, ENV and a start command), boxes made
from it with all of it; a template taken from a prepared box; a build under deny-all
that reaches for the host, another box, metadata and the test internet (the listener sees
nothing); a build that loops past its deadline or fills its disk, failing cleanly; a
template built on another, stale once that one is rebuilt."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..dnsstub import DnsStub
from ..netlab import ALLOWED, METADATA, TestInternet
from .conftest import Server

TINY = {"cpus": 1, "memory_mb": 512, "pids": 512, "description": "tests", "disk_mb": 300}


@pytest.fixture(scope="module")
def tpl(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[Server]:
    srv = Server(
        workdir / "templates", upstream_dns=dns_stub.address, types={"tiny": TINY}, capacity_cpus=8
    )
    status = json.loads(srv.cli("status", "--json", check=True).stdout)
    if status.get("snapshots") != "copy":
        srv.close()
        pytest.skip("the engine's filesystem makes no copy-on-write copies here")
    yield srv
    srv.close()


def deb(folder: Path) -> Path:
    """A Debian package made here (no archive is reachable): it installs /usr/bin/hello-tpl."""
    root = folder / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr/bin").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        "Package: hello-tpl\nVersion: 1.0\nArchitecture: all\nMaintainer: tests <t@t>\n"
        "Description: a package for the template tests\n"
    )
    tool = root / "usr/bin/hello-tpl"
    tool.write_text("#!/bin/sh\necho hello from a template\n")
    tool.chmod(0o755)
    out = folder / "hello-tpl.deb"
    subprocess.run(["dpkg-deb", "--build", str(root), str(out)], check=True, capture_output=True)
    return out


def build(srv: Server, name: str, context: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return srv.cli("template", "build", name, str(context), *args, timeout=600)


def test_a_dockerfile_becomes_boxes_with_its_package_files_env_and_start_command(
    tpl: Server, tmp_path: Path
) -> None:
    deb(tmp_path)
    (tmp_path / "notes.txt").write_text("from the context\n")
    (tmp_path / ".dockerignore").write_text("pkg/\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM paddock-box\n"
        "COPY hello-tpl.deb /tmp/\n"
        "RUN dpkg -i /tmp/hello-tpl.deb && rm /tmp/hello-tpl.deb\n"
        "COPY --chown=abc:abc notes.txt /config/notes.txt\n"
        "ENV PROJECT=paddock-tests\n"
        "CMD date +%s > /tmp/started-at\n"
    )
    done = build(tpl, "tools", tmp_path, "--network", "deny-all", "--default-type", "tiny")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 2/3: RUN dpkg -i" in done.stderr and "template tools is ready" in done.stderr
    shown = json.loads(tpl.cli("template", "show", "tools", "--json", check=True).stdout)
    assert shown["status"] == "ready" and shown["env"] == ["PROJECT=paddock-tests"]
    assert shown["defaults"]["type"] == "tiny" and shown["stale"] is None
    box = f"fromtpl-{uuid.uuid4().hex[:4]}"
    tpl.cli("new", "--name", box, "--template", "tools", check=True)
    try:
        assert tpl.sh(box, "hello-tpl") == "hello from a template\n"
        assert tpl.sh(box, "cat /config/notes.txt; stat -c %U /config/notes.txt") == (
            "from the context\nabc\n"
        )
        assert tpl.sh(box, "echo $PROJECT") == "paddock-tests\n"
        assert json.loads(tpl.cli("show", box, "--json", check=True).stdout)["type"] == "tiny"
        for _ in range(50):  # the start command runs in the background of each boot
            if tpl.cli("exec", box, "--", "test", "-s", "/tmp/started-at").returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the template's start command did not run")
        # A template of a prepared box: its files as they are now.
        tpl.sh(box, "echo prepared > /config/state.txt")
        tpl.cli("template", "create", "prepared", "--from", box, check=True)
        other = f"{box}-2"
        tpl.cli("new", "--name", other, "--template", "prepared", check=True)
        try:
            assert tpl.sh(other, "cat /config/state.txt; hello-tpl") == (
                "prepared\nhello from a template\n"
            )
        finally:
            tpl.cli("rm", "--force", other)
    finally:
        tpl.cli("rm", "--force", box)
    assert [b for b in json.loads(tpl.cli("ls", "--json", check=True).stdout)] == []


def test_a_deny_all_build_reaches_nothing(tpl: Server, tmp_path: Path, workdir: Path) -> None:
    internet = TestInternet(workdir)
    for _ in range(50):  # its own check that it listens, written down a moment later
        if internet.connections():
            break
        time.sleep(0.05)
    internet.reset()
    try:
        probe = " ; ".join(
            f"curl -s -m 3 -o /dev/null http://{target}/ || echo refused {target}"
            for target in (ALLOWED, METADATA, f"{tpl.gateway}:{tpl.port}")
        )
        (tmp_path / "Dockerfile").write_text(f"FROM paddock-box\nRUN {probe}\n")
        done = build(tpl, "sealed", tmp_path, "--network", "deny-all")
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("refused") == 3, done.stdout
        assert internet.connections() == []
    finally:
        internet.close()
    tpl.cli("template", "rm", "sealed", check=True)


def test_a_build_past_its_deadline_or_its_disk_fails_and_leaves_nothing(
    tpl: Server, tmp_path: Path
) -> None:
    (tmp_path / "Dockerfile").write_text("FROM paddock-box\nRUN while :; do sleep 1; done\n")
    started = time.monotonic()
    done = build(tpl, "forever", tmp_path, "--timeout", "15s")
    assert done.returncode == 1 and "ran past its 15 s" in done.stderr
    assert time.monotonic() - started < 60
    (tmp_path / "Dockerfile").write_text("FROM paddock-box\nRUN head -c 400M /dev/zero > /big\n")
    done = build(tpl, "full", tmp_path, "--type", "tiny")
    assert done.returncode == 1 and "exited with" in done.stderr, done.stderr
    assert "No space left on device" in done.stderr
    rows = {t["name"]: t for t in json.loads(tpl.cli("template", "ls", "--json").stdout)}
    assert rows["forever"]["status"] == rows["full"]["status"] == "failed"
    assert json.loads(tpl.cli("ls", "--json", check=True).stdout) == []  # no build box left
    for name in ("forever", "full"):
        tpl.cli("template", "rm", name, check=True)


def test_a_template_on_a_template_is_stale_once_its_base_is_rebuilt(
    tpl: Server, tmp_path: Path
) -> None:
    base, top = tmp_path / "base", tmp_path / "top"
    base.mkdir()
    top.mkdir()
    (base / "Dockerfile").write_text("FROM paddock-box\nRUN echo one > /etc/layer-one\n")
    (top / "Dockerfile").write_text("FROM lower\nRUN cat /etc/layer-one > /etc/layer-two\n")
    assert build(tpl, "lower", base).returncode == 0
    assert build(tpl, "upper", top).returncode == 0
    assert json.loads(tpl.cli("template", "show", "upper", "--json").stdout)["stale"] is None
    assert tpl.cli("template", "rebuild", "lower").returncode == 0
    stale = json.loads(tpl.cli("template", "show", "upper", "--json").stdout)["stale"]
    assert stale and "lower was rebuilt since" in stale
    assert tpl.cli("template", "rebuild", "--all").returncode == 0
    assert json.loads(tpl.cli("template", "show", "upper", "--json").stdout)["stale"] is None
    box = f"upper-{uuid.uuid4().hex[:4]}"
    tpl.cli("new", "--name", box, "--template", "upper", check=True)
    try:
        assert tpl.sh(box, "cat /etc/layer-two") == "one\n"
    finally:
        tpl.cli("rm", "--force", box)
    for name in ("upper", "lower"):
        tpl.cli("template", "rm", name, check=True)
