"""`paddockd backup` while a server runs (a push in flight), `paddockd restore` onto a
second, fresh server: accounts, tokens, secrets, boxes with their files (stopped, from
their newest snapshot) are there; a changed or cut file, a server with state of its own,
or a running paddockd are refused, and leave it as it was."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from paddock import Client

from ..harness import PADDOCKD, Server
from .test_members import create_owner, member_token

pytestmark = pytest.mark.timeout(600)


def paddockd(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PADDOCKD, "--config", str(server.config), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_backup_while_running_and_restore_on_a_fresh_server(
    engine: None, workdir: Path, dns_stub: Any, tmp_path: Path
) -> None:
    backup = tmp_path / "paddock.backup"
    shared = f"bk{uuid.uuid4().hex[:6]}"  # drive names are the engine's, not the server's
    big = tmp_path / "big.bin"
    big.write_bytes(b"\1" * (64 << 20))
    a = Server(workdir / "backup-a", upstream_dns=dns_stub.address)
    try:
        create_owner(a)
        bob = member_token(a, "bob")
        with a.client() as owner:
            owner.set_secret("BACKUP_TOKEN", ["api.github.com"], "ghp_backup0123456789")
            owner.create_box("kept", ttl=3600)
            owner.exec("kept", "echo hello > /config/kept.txt && sync")
            owner.snapshot_box("kept", label="one")
        with Client(a.url, bob) as member:
            member.create_box("bobs", ttl=3600)
            member.exec("bobs", "echo bob > /config/b.txt && sync")
            member.stop_box("bobs")  # its stop snapshot holds the file
            # Drives: the owner's that grows, the member's with a size of its own.
            member.create_drive("bobdata", capacity_mb=64)
            member.create_box("bobwriter", ttl=600, drives=["bobdata"])
            member.exec("bobwriter", "echo on-drive > /mnt/bobdata/note && sync")
            member.delete_box("bobwriter", force=True)
        with a.client() as owner:
            owner.create_drive(shared)
            owner.create_box("writer", ttl=600, drives=[shared])
            owner.exec("writer", f"mkdir /mnt/{shared}/d && echo mine > /mnt/{shared}/d/f")
            owner.delete_box("writer", force=True)

        pushed: list[object] = []

        def push() -> None:
            with a.client() as owner:
                pushed.append(owner.push("kept", [big], "/config/big.bin"))

        pushing = threading.Thread(target=push)
        pushing.start()
        made = paddockd(a, "backup", "-o", str(backup), "--with-snapshots", "--with-drives")
        pushing.join(120)
        assert made.returncode == 0, made.stderr
        assert pushed, "the push in flight failed"
        assert backup.stat().st_mode & 0o777 == 0o600
        assert "backup of 2 box(es)" in made.stderr and "2 drive(s)" in made.stderr
        owner_token = a.token
        with a.client() as owner:  # the engine is shared: the restore makes them again
            owner.delete_drive(shared)
            owner.delete_drive("bobdata", owner="bob")
    finally:
        a.close()

    b = Server(workdir / "backup-b", upstream_dns=dns_stub.address)
    try:
        refused = paddockd(b, "restore", str(backup))
        assert refused.returncode == 1 and "stop it first" in refused.stderr
        b.kill()
        # A changed byte or a cut file: refused, and nothing of it taken.
        damaged = tmp_path / "damaged.backup"
        data = bytearray(backup.read_bytes())
        data[len(data) // 2] ^= 0xFF
        damaged.write_bytes(bytes(data))
        bad = paddockd(b, "restore", str(damaged))
        assert bad.returncode == 1 and "paddockd:" in bad.stderr and "Traceback" not in bad.stderr
        cut = tmp_path / "cut.backup"
        cut.write_bytes(backup.read_bytes()[: len(data) // 3])
        bad = paddockd(b, "restore", str(cut))
        assert bad.returncode == 1 and "Traceback" not in bad.stderr

        done = paddockd(b, "restore", str(backup))
        assert done.returncode == 0, done.stderr
        assert "restored 2 box(es)" in done.stdout and "2 drive(s)" in done.stdout
        b.token = owner_token  # its own token was this install's: the backup's replaced it
        b.start()
        with Client(b.url, owner_token) as owner:  # the old server's token works here
            boxes = {x.name: x for x in owner.list_boxes()}
            assert set(boxes) == {"kept", "bobs"}
            assert {x.state for x in boxes.values()} == {"stopped"}
            assert [s.name for s in owner.list_secrets()] == ["BACKUP_TOKEN"]
            assert "one" in [s.label for s in owner.list_snapshots("kept")]
            owner.resume_box("kept")
            assert owner.exec("kept", "cat /config/kept.txt").stdout == "hello\n"
            # The owner's drive, its files the box user's to change.
            owner.create_box("reader", ttl=600, drives=[shared])
            read = owner.exec("reader", f"cat /mnt/{shared}/d/f && echo more > /mnt/{shared}/d/g")
            assert read.stdout == "mine\n" and read.exit_code == 0, read
            owner.delete_box("reader", force=True)
        with Client(b.url, bob) as member:
            member.resume_box("bobs")
            assert member.exec("bobs", "cat /config/b.txt").stdout == "bob\n"
            drives = {d.name: d for d in member.list_drives()}
            assert drives["bobdata"].capacity_mb == 64
            member.create_box("bobreader", ttl=600, drives=["bobdata"])
            got = member.exec("bobreader", "cat /mnt/bobdata/note; df -m /mnt/bobdata | tail -1")
            assert got.stdout.startswith("on-drive\n"), got
            assert int(got.stdout.split()[2]) <= 64  # its own filesystem's size, as it was
            member.delete_box("bobreader", force=True)
        # Now it has state of its own: a second restore is refused without --force.
        b.kill()
        again = paddockd(b, "restore", str(backup))
        assert again.returncode == 1 and "--force" in again.stderr
        b.start()
    finally:
        with contextlib.suppress(Exception), Client(b.url, owner_token) as owner:
            owner.delete_drive(shared)
            owner.delete_drive("bobdata", owner="bob")
        b.close()
