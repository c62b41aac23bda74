"""One box, one identity, against a real paddockd: each running box is a host uid range of
its own, owner of its own user namespace, so the kernel's per-user budgets are each box's.

Before the fix every box's root was host uid 200000 in a namespace owned by host root: a
member's box that held session keyrings spent uid 200000's key quota, after which every
exec, terminal and file operation of every box failed ("unable to join session keyring:
disk quota exceeded") and no box could start; one that held inotify instances spent host
root's (the namespace owner's) 128, and the host's own daemons could watch nothing."""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from paddock import Client

from ...harness import ENGINE_SOCKET
from ..conftest import Server
from ..test_members import member_token

pytestmark = pytest.mark.timeout(600)
TOOLS = Path(__file__).with_name("boxtools.py")
FIRST_IDENTITY = 0x70000000
_NS_GET_OWNER_UID = 0xB704  # _IO(0xb7, 0x4)


@pytest.fixture(scope="module")
def member(server: Server) -> str:
    return member_token(server, f"m{uuid.uuid4().hex[:6]}")


@pytest.fixture
def boxes(server: Server, member: str) -> Iterator[dict[str, str]]:
    """An attacker box (a member's) and a victim box (the owner's), each with the tools."""
    made = {"attacker": f"a-{uuid.uuid4().hex[:6]}", "victim": f"v-{uuid.uuid4().hex[:6]}"}
    with Client(url=server.url, token=member) as c:
        c.create_box(made["attacker"], ttl=900)
    with server.client() as c:
        c.create_box(made["victim"], ttl=900)
    for name in made.values():
        run_as = member if name == made["attacker"] else server.token
        with Client(url=server.url, token=run_as) as c:
            c.push(name, [str(TOOLS)], "/tmp")
    yield made
    with server.client() as c:
        for name in made.values():
            c.delete_box(name, force=True)


def attack(server: Server, token: str, box: str, *args: str) -> str:
    with Client(url=server.url, token=token) as c:
        done = c.exec(box, ["python3", "/tmp/boxtools.py", *args], user="root")
    return done.stdout + done.stderr


def init_pid(server: Server, box: str) -> int:
    with server.client() as c:
        box_id = c.get_box(box).id
    data = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}").inspect_container(
        f"paddock-{box_id}"
    )
    return int(data["State"]["Pid"])


def host_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])  # effective
    raise AssertionError("no Uid line")


def userns_owner(pid: int) -> int:
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, _NS_GET_OWNER_UID, buf)
        return int(struct.unpack("I", buf)[0])
    finally:
        os.close(fd)


def host_can_watch() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd >= 0:
        os.close(fd)
    return fd >= 0


def test_each_box_is_a_uid_range_of_its_own_and_owns_its_namespace(
    server: Server, member: str, boxes: dict[str, str]
) -> None:
    pids = {role: init_pid(server, name) for role, name in boxes.items()}
    uids = {role: host_uid(pid) for role, pid in pids.items()}
    assert uids["attacker"] != uids["victim"]
    for role, uid in uids.items():
        assert uid >= FIRST_IDENTITY and (uid - FIRST_IDENTITY) % 65536 == 0, role
        assert userns_owner(pids[role]) == uid, role  # the budgets' payer is the box
    # Inside, nothing changed: root is 0, the box user 1000, files are theirs.
    with server.client() as c:
        c.exec(boxes["victim"], ["sh", "-c", "echo hi > /config/mine"])
        seen = c.exec(boxes["victim"], ["stat", "-c", "%u %g", "/config/mine", "/"], user="root")
    assert seen.stdout.split("\n")[:2] == ["1000 1000", "0 0"]


def test_a_box_that_floods_keyrings_stops_no_other_box(
    server: Server, member: str, boxes: dict[str, str]
) -> None:
    said = attack(server, member, boxes["attacker"], "keys", "400")
    assert said.startswith("made 0 (Function not implemented)"), said  # as a kernel without keys
    # runc joins a session keyring for every exec as the box's uid: the victim's own.
    with server.client() as c:
        for _ in range(5):
            assert c.exec(boxes["victim"], ["true"]).exit_code == 0
        fresh = f"n-{uuid.uuid4().hex[:6]}"
        c.create_box(fresh, ttl=600)
        try:
            assert c.exec(fresh, ["true"]).exit_code == 0
        finally:
            c.delete_box(fresh, force=True)
    attacker_uid = host_uid(init_pid(server, boxes["attacker"]))
    users = Path("/proc/key-users").read_text()
    line = next(
        (ln for ln in users.splitlines() if ln.split(":")[0].strip() == str(attacker_uid)), ""
    )
    held = int(line.split()[3].split("/")[0]) if line else 0
    assert held <= 3, users  # its init's keyring and an exec's, at most


def test_a_box_that_holds_every_inotify_instance_it_can_harms_no_one_else(
    server: Server, member: str, boxes: dict[str, str]
) -> None:
    with Client(url=server.url, token=member) as c:
        c.exec(
            boxes["attacker"],
            [
                "sh",
                "-c",
                "setsid python3 /tmp/boxtools.py inotify 1 > /tmp/held 2>&1 < /dev/null &"
                " for i in $(seq 50); do [ -s /tmp/held ] && break; sleep 0.1; done; cat /tmp/held",
            ],
            user="root",
        )
        held = c.exec(boxes["attacker"], ["cat", "/tmp/held"]).stdout
    assert held.startswith("made ") and "Too many open files" in held, held
    # The attacker met its own limit, not a shared one: the same limit is the victim's too.
    victim = attack(server, server.token, boxes["victim"], "inotify", "0")
    assert victim.startswith("made ") and int(victim.split()[1]) >= 100, victim
    assert host_can_watch()  # host root's own budget (the namespaces' owner before)
    with server.client() as c:
        fresh = f"n-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        c.create_box(fresh, ttl=600)
        try:
            # Docker in a new box watches its files with inotify as it starts.
            done = c.exec(
                fresh, ["python3", "-c", "import ctypes; print(ctypes.CDLL(None).inotify_init1(0))"]
            )
            assert int(done.stdout) >= 0
        finally:
            c.delete_box(fresh, force=True)
    assert time.monotonic() - started < 60


def test_many_boxes_each_run_on_an_identity_of_their_own(make_server: type[Server]) -> None:
    """bench.identities starts 300; this bounded version a dozen, all at once."""
    from concurrent.futures import ThreadPoolExecutor

    srv = make_server(types={"speck": {"cpus": 0.1, "memory_mb": 96, "pids": 128, "disk_mb": 256}})
    names = [f"many-{i}-{uuid.uuid4().hex[:4]}" for i in range(12)]

    def start(name: str) -> int:
        with srv.client() as c:
            c.create_box(name, box_type="speck", ttl=600)
            assert c.exec(name, ["true"]).exit_code == 0
        return host_uid(init_pid(srv, name))

    with ThreadPoolExecutor(4) as pool:
        uids = list(pool.map(start, names))
    assert len(set(uids)) == len(names) and min(uids) >= FIRST_IDENTITY
    with srv.client() as c:
        for name in names:
            c.delete_box(name, force=True)
    # Their identities are free again once the engine forgot the containers.
    deadline = time.monotonic() + 60
    while srv.containers() and time.monotonic() < deadline:
        time.sleep(0.5)
    slots = Path("/run/paddock/identities")
    left = {int(p.name) for p in slots.iterdir() if p.name.isdigit()}
    assert not {(u - FIRST_IDENTITY) // 65536 for u in uids} & left
