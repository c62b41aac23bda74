"""Snapshots, restores and forks as copies of a box's disk, on the real engine (its XFS
shares extents): what a live snapshot holds, byte for byte and with its metadata; a
database written under load forks clean; a freeze cannot be made to last, even when the
copier dies holding it; many forks are all or nothing; copies cost only what changed;
a fork may grow into a larger type; a box reads nothing of another's blocks."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..dnsstub import DnsStub
from ..harness import DRIVES, PADDOCK, Server, wait_for

TINY = {"cpus": 1, "memory_mb": 512, "pids": 512, "description": "tests", "disk_mb": 400}
ROOMY = {"cpus": 1, "memory_mb": 512, "pids": 512, "description": "tests", "disk_mb": 600}
SAVED = DRIVES.root.parent / "paddock-disks" / "saved"


@pytest.fixture(scope="module")
def copies(engine: None, workdir: Path, dns_stub: DnsStub) -> Iterator[Server]:
    srv = Server(
        workdir / "copies",
        upstream_dns=dns_stub.address,
        types={"tiny": TINY, "roomy": ROOMY},
        capacity_cpus=6,
        default_type="tiny",
    )
    status = json.loads(srv.cli("status", "--json", check=True).stdout)
    if status.get("snapshots") != "copy":
        srv.close()
        pytest.skip("the engine's filesystem makes no copy-on-write copies here")
    yield srv
    srv.close()


@pytest.fixture
def tiny(copies: Server) -> Iterator[str]:
    name = f"dc-{uuid.uuid4().hex[:6]}"
    copies.cli("new", "--name", name, "--ttl", "600", check=True)
    yield name
    copies.cli("rm", "--force", name)


def _snaps(srv: Server, box: str) -> list[dict[str, object]]:
    return list(json.loads(srv.cli("snapshots", box, "--json", check=True).stdout))


def _saved(srv: Server) -> set[str]:
    folder = SAVED / srv.instance
    return {str(p.relative_to(folder)) for p in folder.glob("*/*.ext4")}


# Owners, modes, an xattr, a hard link, a sparse file, a symlink; then every byte's sum.
_MAKE = r"""
set -e
mkdir -p /srv/d && cd /srv/d
head -c 5M /dev/urandom > data && sync data
echo one > linked && ln linked hard && ln -s data soft
chown 1234:2345 linked && chmod 4710 linked
python3 -c "import os; os.setxattr('data', 'user.paddock', b'kept')"
truncate -s 1G holes && printf tail >> holes
sync
"""
_CHECK = r"""
cd /srv/d
sha256sum data
stat -c '%u:%g %a %h' linked
[ "$(stat -c %i linked)" = "$(stat -c %i hard)" ] && echo same-inode
readlink soft
python3 -c "import os; print(os.getxattr('data', 'user.paddock').decode())"
echo "blocks $(( $(stat -c %b holes) < 1024 ))" ; tail -c 4 holes; echo
"""


def test_a_live_snapshot_keeps_bytes_owners_xattrs_links_and_holes(
    copies: Server, tiny: str
) -> None:
    copies.sh(tiny, _MAKE, user="root")
    before = copies.sh(tiny, _CHECK, user="root")
    assert "1234:2345 4710 2" in before and "same-inode" in before and "blocks 1" in before
    copies.cli("snapshot", tiny, "--name", "s", check=True)
    copies.sh(tiny, "rm -rf /srv/d", user="root")

    def made() -> set[str]:
        return {str(c["Id"]) for c in copies.containers()}

    before_fork = made()
    fork = f"{tiny}-f"
    copies.cli("fork", tiny, "--snapshot", "s", "--name", fork, check=True)
    try:
        assert copies.sh(fork, _CHECK, user="root") == before
    finally:
        copies.cli("rm", "--force", fork, check=True)
    wait_for(lambda: made() == before_fork, 30, "the fork's container to go")
    copies.cli("restore", tiny, "--snapshot", "s", check=True)
    assert copies.sh(tiny, _CHECK, user="root") == before
    # In place: the box's own container, given a copy of the snapshot's disk.
    assert made() == before_fork
    copies.sh(tiny, "rm -rf /srv/d", user="root")
    copies.cli("stop", tiny, check=True)
    copies.cli("restore", tiny, "--snapshot", "s", check=True)
    copies.cli("resume", tiny, check=True)
    assert copies.sh(tiny, _CHECK, user="root") == before


_WRITER = r"""
import sqlite3, sys, time
db = sqlite3.connect('/config/load.db', isolation_level=None)
db.execute('PRAGMA journal_mode=WAL')
db.execute('CREATE TABLE IF NOT EXISTS t (n INTEGER, pad BLOB)')
n = 0
print('ready', flush=True)
while True:
    db.execute('BEGIN')
    for _ in range(50):
        n += 1
        db.execute('INSERT INTO t VALUES (?, randomblob(2000))', (n,))
    db.execute('COMMIT')
"""
_VERIFY = (
    "python3 -c \"import sqlite3; db = sqlite3.connect('/config/load.db'); "
    "print(db.execute('PRAGMA integrity_check').fetchone()[0], "
    "db.execute('SELECT count(*) FROM t').fetchone()[0])\""
)


def test_a_database_under_write_load_forks_clean(copies: Server, tiny: str) -> None:
    writer = subprocess.Popen(
        [PADDOCK, "exec", tiny, "--", "python3", "-c", _WRITER],
        env=copies.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    fork = f"{tiny}-db"
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
        time.sleep(1.5)  # rows are going in
        started = time.monotonic()
        copies.cli("fork", tiny, "--name", fork, check=True)
        took = time.monotonic() - started
        assert writer.poll() is None, "the writer died during the fork"
        status, rows = copies.sh(fork, _VERIFY).split()
        assert status == "ok" and int(rows) > 0
        # The source kept writing through it: its freeze was short.
        later = int(copies.sh(tiny, _VERIFY).split()[1])
        assert later >= int(rows)
        assert took < 20, f"a fork under write load took {took:.1f} s"
    finally:
        writer.kill()
        writer.wait()
        copies.cli("rm", "--force", fork)


def test_a_copier_killed_holding_the_freeze_leaves_no_box_frozen(
    engine: None, workdir: Path, dns_stub: DnsStub
) -> None:
    """The worst case: the program that froze the box's disk dies before it thaws. Its
    watchdog thaws the disk within the freeze's time limit; nothing is left half-made."""
    from paddockd.runtime.diskcopy import FREEZE_LIMIT

    srv = Server(workdir / "frozen", upstream_dns=dns_stub.address, types={"tiny": TINY})
    try:
        srv.kill()
        srv.start(fault="snapshot.frozen")
        srv.cli("new", "--type", "tiny", "--name", "frz", "--ttl", "600", check=True)
        failed = srv.cli("snapshot", "frz")
        assert failed.returncode != 0 and "Traceback" not in failed.stderr
        assert "could not snapshot box frz" in failed.stderr
        # The box's writes wait at most the freeze's limit (measured from the snapshot).
        started = time.monotonic()
        srv.sh("frz", "echo after > /config/after && sync")
        assert time.monotonic() - started < FREEZE_LIMIT + 10
        assert _snaps(srv, "frz") == [] and _saved(srv) == set()
        assert srv.proc is not None and srv.proc.poll() is None  # paddockd lives on
    finally:
        srv.close()


def test_a_box_writing_hard_cannot_make_a_snapshot_last(copies: Server, tiny: str) -> None:
    """A box that blocks in its own filesystem (writers queued on the freeze, fsyncs in
    a loop) gets its snapshot in well under the freeze's limit, and writes on after."""
    copies.sh(
        tiny,
        "for i in 1 2 3 4; do (while :; do head -c 4M /dev/zero > /config/w$i; "
        "sync /config/w$i; done) >/dev/null 2>&1 & done; sleep 1",
    )
    for _ in range(3):
        started = time.monotonic()
        copies.cli("snapshot", tiny, check=True)
        assert time.monotonic() - started < 5
    assert copies.sh(tiny, "timeout 10 sh -c 'echo ok > /config/done && sync'; cat /config/done")


def test_many_forks_at_once_are_all_or_nothing(copies: Server, tiny: str) -> None:
    copies.sh(tiny, "echo source > /config/who")
    before = _saved(copies)
    # 6 CPUs: the source holds one, so five more fit, six do not.
    refused = copies.cli("fork", tiny, "--count", "6", "--name-prefix", "nope")
    assert refused.returncode != 0 and "server is full" in refused.stderr
    assert not [b for b in _boxes(copies) if b.startswith("nope")]
    # Nothing new: the last test's box's saved disks may be swept meanwhile.
    assert _saved(copies) - before == set()
    made = copies.cli("fork", tiny, "--count", "5", "--name-prefix", "m", "--json", check=True)
    names = [b["name"] for b in json.loads(made.stdout)]
    try:
        assert names == [f"m-{i}" for i in range(1, 6)]
        for name in names:
            assert copies.sh(name, "cat /config/who") == "source\n"
        assert copies.sh(names[0], "echo mine > /config/who; cat /config/who") == "mine\n"
        assert copies.sh(names[1], "cat /config/who") == "source\n"
    finally:
        for name in names:
            copies.cli("rm", "--force", name)
    usage = copies.cli("fork", tiny, "--name", "x", "--count", "2")
    assert usage.returncode == 2 and "--name-prefix" in usage.stderr


def _boxes(srv: Server) -> list[str]:
    return [b["name"] for b in json.loads(srv.cli("ls", "--json", check=True).stdout)]


def test_twenty_snapshots_cost_what_changed_and_removal_frees_it(copies: Server, tiny: str) -> None:
    copies.sh(tiny, "head -c 64M /dev/urandom > /config/big && sync")
    for _ in range(20):
        copies.cli("snapshot", tiny, check=True)
    snaps = _snaps(copies, tiny)
    assert len(snaps) == 20 and all(s["method"] == "copy" for s in snaps)
    own = sum(int(str(s["own_bytes"])) for s in snaps)
    assert own < 8 << 20, f"20 copies hold {own} bytes of their own"
    assert all(int(str(s["shared_bytes"])) > 60 << 20 for s in snaps)
    # Once the box has changed and the other copies are gone, the one left owns what it
    # kept: nothing else has those blocks any more.
    copies.sh(tiny, "head -c 64M /dev/urandom > /config/big && sync")
    for snap in snaps[1:]:
        copies.cli("snapshots", "rm", tiny, str(snap["id"]), check=True)
    (last,) = _snaps(copies, tiny)
    assert int(str(last["own_bytes"])) > 60 << 20
    with copies.client() as c:
        box_id = c.get_box(tiny).id
    assert len([k for k in _saved(copies) if k.startswith(box_id)]) == 1
    copies.cli("rm", "--force", tiny, check=True)
    deadline = time.monotonic() + 30
    while any(k.startswith(box_id) for k in _saved(copies)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not [k for k in _saved(copies) if k.startswith(box_id)]


def test_a_fork_grows_into_a_larger_type_and_not_a_smaller_one(copies: Server, tiny: str) -> None:
    copies.sh(tiny, "echo kept > /config/k")
    fork = f"{tiny}-big"
    copies.cli("fork", tiny, "--name", fork, "--type", "roomy", check=True)
    try:
        size = int(copies.sh(fork, "df -m --output=size / | tail -1"))
        assert 500 < size <= 600, size  # the tiny source had 400 MiB
        assert copies.sh(fork, "cat /config/k") == "kept\n"
        back = copies.cli("fork", fork, "--name", f"{tiny}-small", "--type", "tiny")
        assert back.returncode != 0 and "too small" in back.stderr
    finally:
        copies.cli("rm", "--force", fork)


def test_a_box_reads_nothing_of_another_boxes_blocks(copies: Server, tiny: str) -> None:
    secret = uuid.uuid4().hex
    copies.sh(
        tiny,
        f"for i in $(seq 4000); do echo {secret}; done > /config/s && sync && rm /config/s && sync",
    )
    copies.cli("snapshot", tiny, check=True)  # its disk, deleted blocks and all, copied
    other = f"{tiny}-o"
    copies.cli("new", "--name", other, "--ttl", "600", check=True)
    try:
        found = copies.sh(
            other,
            "fallocate -l 300M /config/f && (grep -c " + secret + " /config/f || true); "
            "(ls /dev | grep -c '^loop' || true); "
            "(mknod /tmp/l b 7 0 2>/dev/null && head -c1 /tmp/l >/dev/null 2>&1 && echo read "
            "|| echo refused)",
            user="root",
        ).split()
        assert found[0] == "0"
        # No device of the host's in the box to read around its filesystem, nor one to make.
        assert found[1:] == ["0", "refused"]
    finally:
        copies.cli("rm", "--force", other)


def test_concurrent_snapshots_and_forks_leave_nothing_behind(copies: Server, tiny: str) -> None:
    errors: list[str] = []

    def snapshot() -> None:
        done = copies.cli("snapshot", tiny)
        if done.returncode != 0:
            errors.append(done.stderr)

    threads = [threading.Thread(target=snapshot) for _ in range(4)]
    for t in threads:
        t.start()
    made = copies.cli("fork", tiny, "--count", "2", "--name-prefix", "cc", check=True)
    for t in threads:
        t.join()
    assert errors == []
    for name in made.stdout.split():
        copies.cli("rm", "--force", name, check=True)
    with copies.client() as c:
        box_id = c.get_box(tiny).id
    keys = {k for k in _saved(copies) if not k.startswith("forks/")}
    assert len([k for k in keys if k.startswith(box_id)]) == len(_snaps(copies, tiny)) == 4
    assert not [k for k in _saved(copies) if k.startswith("forks/")]


def test_a_write_in_flight_cannot_hold_a_freeze_past_its_limit(copies: Server, tiny: str) -> None:
    """FIFREEZE waits for the box's writes in flight: one huge write() at the box's disk
    rate could hold it off. The snapshot answers within the limit (made or refused), and
    the box is never left frozen."""
    from paddockd.runtime.diskcopy import FREEZE_LIMIT

    copies.sh(
        tiny,
        "nohup python3 -c \"import os; fd = os.open('/config/huge', os.O_WRONLY | os.O_CREAT); "
        "[os.write(fd, b'x' * (256 << 20)) for _ in range(8)]\" >/dev/null 2>&1 & sleep 0.5",
    )
    started = time.monotonic()
    done = copies.cli("snapshot", tiny)
    assert time.monotonic() - started < FREEZE_LIMIT + 10
    assert done.returncode == 0 or "freeze" in done.stderr, done.stderr
    started = time.monotonic()
    copies.sh(tiny, "echo thawed > /config/after")
    assert time.monotonic() - started < FREEZE_LIMIT + 10
