"""Integration fixtures: the real box engine and paddockd processes of the tests' own
(see tests/harness.py), so tests never touch boxes of an installed Paddock and can kill
and restart their server at will."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import docker
import pytest

from ..dnsstub import DnsStub
from ..harness import ENGINE_SOCKET, IMAGE, PADDOCK, PADDOCKD, ROOT, Server, free_port
from ..netlab import TestInternet

__all__ = ["ENGINE_SOCKET", "PADDOCK", "PADDOCKD", "ROOT", "Server", "free_port"]


@pytest.fixture(scope="session")
def engine() -> None:
    """The machine's box engine, started if needed, with the box image built."""
    subprocess.run([PADDOCKD, "engine", "start"], check=True, capture_output=True)
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    try:
        api.inspect_image(IMAGE)
    except docker.errors.NotFound:
        pytest.fail(
            f"the box image {IMAGE} is missing: run ./install.sh (or `paddock image build`)"
        )


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="paddock-itest-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def dns_stub() -> Iterator[DnsStub]:
    stub = DnsStub()
    yield stub
    stub.close()


@pytest.fixture(scope="session")
def server(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[Server]:
    srv = Server(workdir / "main", upstream_dns=dns_stub.address)
    yield srv
    srv.close()
    assert srv.containers() == [], "the test run left containers behind"


@pytest.fixture(scope="module")
def internet(workdir: Path) -> Iterator[TestInternet]:
    """The tests' "internet": an on-machine namespace (tests/netlab.py), one per module."""
    net = TestInternet(workdir)
    yield net
    net.close()


@pytest.fixture
def make_server(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[type[Server]]:
    made: list[Server] = []

    def factory(**settings: object) -> Server:
        settings.setdefault("upstream_dns", dns_stub.address)
        srv = Server(workdir / uuid.uuid4().hex[:6], **settings)
        made.append(srv)
        return srv

    yield factory  # type: ignore[misc]
    for srv in made:
        srv.close()


@pytest.fixture
def box(server: Server) -> Iterator[str]:
    yield from _new_box(server)


@pytest.fixture
def other_box(server: Server) -> Iterator[str]:
    """A second box of the session's server (a victim beside `box`, say)."""
    yield from _new_box(server)


def _new_box(server: Server) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    with server.client() as c:
        c.create_box(name, ttl=900)
    yield name
    # The test may have deleted it already.
    with server.client() as c, contextlib.suppress(Exception):
        c.delete_box(name, force=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def hostname() -> Iterator[str]:
    """A made-up hostname that resolves to loopback (in /etc/hosts) while a module runs."""
    name = f"pd-{uuid.uuid4().hex[:8]}.test"
    line = f"127.0.0.1 {name}  # paddock test\n"
    hosts = Path("/etc/hosts")
    with hosts.open("a") as f:
        f.write(line)
    yield name
    hosts.write_text(hosts.read_text().replace(line, ""))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test carries what each server it used (the session's, or one of its own
    fixtures') was doing: its log's last lines up to the failure, then its threads' and
    tasks' stacks (paddockd's SIGUSR1/SIGUSR2, src/paddockd/stacks.py), each a section of
    its own. A server's log goes with it when its fixture ends."""
    report = yield
    if report.when != "call" or not report.failed:
        return report
    for name, srv in getattr(item, "funcargs", {}).items():
        if isinstance(srv, Server):
            _server_sections(report, name, srv)
    return report


def _server_sections(report: pytest.TestReport, name: str, srv: Server) -> None:
    log = srv.dir / "paddockd.log"
    try:
        before = log.read_bytes()
    except OSError:
        return
    lines = before.decode(errors="replace").splitlines()
    report.sections.append((f"{name}: paddockd's log (last 200 lines)", "\n".join(lines[-200:])))
    if srv.proc is not None and srv.proc.poll() is None:
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            with contextlib.suppress(OSError):
                srv.proc.send_signal(sig)
        time.sleep(1)
        with contextlib.suppress(OSError), log.open("rb") as f:
            f.seek(len(before))
            stacks = f.read(1 << 20).decode(errors="replace")
            report.sections.append((f"{name}: paddockd's threads and tasks", stacks))
