"""Everything a box can write counts against its own size, against a real paddockd: a box
writes as much as it can into every writable mount it has, and makes a sparse file far
larger than its disk and stops; the engine's shared filesystem (every box's layers,
snapshots and images) and the host's root disk stay as they were.

Before the fix `/etc/hostname`, `/etc/hosts` and `/etc/resolv.conf` were the engine's own
files on its shared filesystem, bound in read-write: `dd` wrote 2 GB there while the box's
`df /` stayed at 1 MB. And `truncate -s 3G` cost nothing in the box but 3 GB of the shared
filesystem at its next stop (a commit writes holes out as zeros)."""

from __future__ import annotations

import os
import uuid

import pytest

from ..conftest import Server

pytestmark = pytest.mark.timeout(900)
MIB = 1 << 20
DISK_MB = 256
TYPES = {"tiny": {"cpus": 1, "memory_mb": 1024, "pids": 512, "disk_mb": DISK_MB}}
DATA_ROOT = "/var/lib/paddock/engine"
# Each writable mount of the box (from its own mount table), filled until the kernel says
# no (or 400 MiB, well past the box's disk): what it wrote is printed per mount.
FILL = r"""
import os
done = {}
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    point, opts = fields[4], fields[5].split(",")
    if "rw" not in opts or point.startswith(("/proc", "/sys", "/dev/pts", "/dev/mqueue")):
        continue
    target = point if os.path.isfile(point) else os.path.join(point, ".paddock-fill")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | (0 if target == point else os.O_TRUNC))
    except OSError as exc:
        done[point] = f"refused: {exc.strerror}"
        continue
    wrote, chunk = 0, b"x" * (1 << 20)
    try:
        while wrote < 400 << 20:
            wrote += os.write(fd, chunk)
    except OSError as exc:
        pass
    os.close(fd)
    done[point] = wrote >> 20
    if target != point:
        os.unlink(target)
print(done)
"""


def free_mib(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // MIB


def test_a_box_fills_only_its_own_disk_whatever_it_writes(make_server: type[Server]) -> None:
    srv = make_server(types=TYPES)
    name = f"fill-{uuid.uuid4().hex[:6]}"
    with srv.client() as c:
        c.create_box(name, box_type="tiny", ttl=900)
        before = {p: free_mib(p) for p in (DATA_ROOT, "/")}
        done = c.exec(name, ["python3", "-c", FILL], user="root")
        assert done.exit_code == 0, done.stderr
        wrote = eval(done.stdout)  # the box's own report: a dict of small ints and strings
        # The engine files the box once filled without bound are among them (resolv.conf
        # too where the engine writes it; paddockd's own is read-only).
        assert {"/etc/hostname", "/etc/hosts"} <= set(wrote), wrote
        for path in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
            assert wrote.get(path) != 400, (path, wrote)  # the box's disk stopped it
        lost = {p: before[p] - free_mib(p) for p in before}
        # The box's root and its Docker volume are each a filesystem of DISK_MB in a file on
        # the engine's filesystem: what they hold is all the box may take there.
        assert lost[DATA_ROOT] < 2 * DISK_MB + 64, (lost, wrote)
        assert lost["/"] < 64, (lost, wrote)
        c.delete_box(name, force=True)


def test_a_sparse_file_past_the_disk_is_never_written_out_by_a_stop(
    make_server: type[Server],
) -> None:
    srv = make_server(types=TYPES)
    name = f"sparse-{uuid.uuid4().hex[:6]}"
    with srv.client() as c:
        c.create_box(name, box_type="tiny", ttl=900)
        c.exec(name, ["truncate", "-s", "20G", "/config/sparse.img"])
        c.exec(name, ["sh", "-c", "echo kept > /config/note"])
        before = free_mib(DATA_ROOT)
        stopped = c.stop_box(name)
        assert free_mib(DATA_ROOT) > before - 64  # not 20 GB of zeros
        if c.status().snapshots == "copy":
            # A copy of the disk keeps the hole a hole: the snapshot is taken, for nothing.
            assert stopped.state == "stopped" and stopped.message is None
            (snap,) = c.list_snapshots(name)
            assert snap.method == "copy" and (snap.own_bytes or 0) < 1 << 20
            c.snapshot_box(name)
            assert free_mib(DATA_ROOT) > before - 64
        else:
            assert stopped.state == "stopped" and "without a snapshot" in (stopped.message or "")
            with pytest.raises(Exception, match="sparse"):
                c.snapshot_box(name)
        c.resume_box(name)
        assert c.exec(name, ["cat", "/config/note"]).stdout == "kept\n"  # nothing was lost
        c.delete_box(name, force=True)
