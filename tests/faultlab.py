"""The fault suite's lab: a test paddockd killed at a named point of an operation
(src/paddockd/faults.py), restarted without the fault, and checked until it has converged.
Shared by tests/integration/test_faults.py and bench/faults.py.

"Converged" is read from the outside, never from paddockd's own view: the API (every box
where it wants to be, `status` without problems), the engine (one container per box,
running exactly when its box is, no unreferenced snapshot image) and the kernel (the
instance's nftables sets hold each running box's address under its policy)."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker

from paddock import Client

from .harness import DRIVES, ENGINE_SOCKET, Server

ACKED = "/config/acked"
POLICY = "198.18.1.0/24"
SNAPSHOTS = "paddock-snapshots/"


def _blob(size: int) -> bytes:
    return os.urandom(size)


@dataclass
class Lab:
    """One test paddockd and what it acknowledged: box -> file name -> sha256."""

    srv: Server
    keep: str = "keep"
    # Engine volumes' names are the engine's, not the instance's: unique to this lab.
    drive: str = field(default_factory=lambda: f"fd{uuid.uuid4().hex[:8]}")
    acked: dict[str, dict[str, str]] = field(default_factory=dict)
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="faultlab-")))
    api: docker.APIClient = field(
        default_factory=lambda: docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    )

    def client(self) -> Client:
        return self.srv.client()

    def ack(self, box: str, size: int = 4096) -> None:
        """Push a new file into the box; once the push is answered it must never be lost."""
        name = f"{uuid.uuid4().hex[:8]}.bin"
        data = _blob(size)
        local = self.scratch / name
        local.write_bytes(data)
        with self.client() as c:
            c.exec(box, ["mkdir", "-p", ACKED])
            c.push(box, [str(local)], f"{ACKED}/{name}")
        local.unlink()
        self.acked.setdefault(box, {})[name] = hashlib.sha256(data).hexdigest()

    @property
    def acked_count(self) -> int:
        return sum(len(files) for files in self.acked.values())

    def lost(self) -> list[str]:
        """Acknowledged files missing or changed, as `box:file`; read with a pull, which
        works on a stopped box too and changes nothing."""
        missing = []
        for box, files in self.acked.items():
            dest = self.scratch / f"pull-{uuid.uuid4().hex[:6]}"
            dest.mkdir()
            try:
                with self.client() as c:
                    c.pull(box, ACKED + "/.", dest)
            except Exception as exc:  # the box itself is gone
                missing += [f"{box}:{name} ({exc})" for name in files]
                continue
            for name, digest in files.items():
                path = dest / name
                if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                    missing.append(f"{box}:{name}")
        return missing

    def crash(self, fault: str, act: Callable[[Lab], object]) -> None:
        """Restart paddockd armed with `fault`, do `act`, and see paddockd die of it."""
        self.srv.kill()
        self.srv.start(fault=fault)
        with contextlib.suppress(Exception):  # the answer never comes: paddockd is dead
            act(self)
        if not self.srv.died(timeout=60):
            self.srv.kill()
            raise AssertionError(f"paddockd did not reach the fault point {fault}")

    # -- convergence, from the outside -----------------------------------------------------
    def problems(self) -> list[str]:
        """Why the server has not converged yet; empty once it has."""
        try:
            with self.client() as c:
                status = c.status()
                boxes = c.list_boxes()
                snapshots = {b.name: c.list_snapshots(b.name) for b in boxes}
        except Exception as exc:
            return [f"API: {exc}"]
        found = []
        if not status.engine.reachable:
            found.append(f"engine unreachable: {status.engine.error}")
        found += [f"status: {p}" for p in status.problems]
        containers: dict[str, list[dict[str, object]]] = {}
        for row in self.srv.containers():
            labels = row.get("Labels") or {}
            assert isinstance(labels, dict)
            containers.setdefault(str(labels.get("paddock.box", "")), []).append(row)
        ids = {b.id for b in boxes}
        found += [f"container of no box: {k}" for k in containers if k not in ids]
        addresses: dict[str, tuple[str, str]] = {}
        for box in boxes:
            want = "running" if box.desired_state == "running" else "stopped"
            if box.state != want:
                found.append(f"box {box.name}: {box.state}, wants {box.desired_state}")
            mine = containers.get(box.id, [])
            if len(mine) != 1:
                found.append(f"box {box.name}: {len(mine)} containers")
                continue
            running = mine[0].get("State") == "running"
            if running != (box.state == "running"):
                up = "up" if running else "down"
                found.append(f"box {box.name}: {box.state} but its container is {up}")
            if running:
                ip = self._address(str(mine[0]["Id"]))
                mode = box.network.mode if box.network else "allow-all"
                addresses[box.name] = (ip, mode)
        found += self._rules(addresses)
        found += self._unreferenced_images(
            {s.image for snaps in snapshots.values() for s in snaps} | {b.image for b in boxes}
        )
        return found

    def _address(self, cid: str) -> str:
        networks = self.api.inspect_container(cid)["NetworkSettings"]["Networks"]
        return next((n["IPAddress"] for n in networks.values() if n.get("IPAddress")), "")

    def nft_set(self, family: str, name: str) -> str | None:
        done = subprocess.run(
            ["nft", "list", "set", family, self.srv.table, name], capture_output=True, text=True
        )
        return done.stdout if done.returncode == 0 else None

    def _rules(self, addresses: dict[str, tuple[str, str]]) -> list[str]:
        sets = {
            name: self.nft_set("inet", name)
            for name in ("boxes", "deny_all", "allowlisted", "allowed")
        }
        sets["bound"] = self.nft_set("bridge", "bound")
        missing = [f"nft set {name} is missing" for name, text in sets.items() if text is None]
        if missing:
            return missing
        found = []

        def has(name: str, pattern: str) -> bool:
            return re.search(pattern, sets[name] or "") is not None

        for box, (ip, mode) in addresses.items():
            at = rf"(?<![\d.]){re.escape(ip)}(?![\d.])"
            expected = {
                "boxes": True,
                "bound": True,
                "deny_all": mode == "deny-all",
                "allowlisted": mode == "allowlist",
            }
            found += [
                f"box {box} ({ip}): {'not ' if want else ''}in nft set {name}"
                for name, want in expected.items()
                if has(name, at) != want
            ]
        return found

    def _unreferenced_images(self, needed: set[str]) -> list[str]:
        rows = self.api.images(filters={"label": f"paddock.instance={self.srv.instance}"})
        found = []
        for row in rows:
            tags = [t for t in row.get("RepoTags") or [] if t != "<none>:<none>"]
            if all(t.startswith(SNAPSHOTS) for t in tags) and not needed & set(tags):
                found.append(f"unreferenced image {row['Id'][:19]} {tags}")
        return found

    def converge(self, deadline: float = 45) -> float:
        """Seconds until nothing is left to repair; fails with what is left at the deadline."""
        started = time.monotonic()
        while True:
            left = self.problems()
            if not left:
                return time.monotonic() - started
            if time.monotonic() - started > deadline:
                raise AssertionError(f"not converged after {deadline:.0f} s: {left}")
            time.sleep(0.25)

    def restart(self) -> float:
        """Start paddockd without a fault; seconds from the start until it has converged."""
        started = time.monotonic()
        self.srv.start()
        self.converge()
        return time.monotonic() - started

    def box_names(self) -> set[str]:
        with self.client() as c:
            return {b.name for b in c.list_boxes()}


# -- the scenarios ------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """`fault`: the point paddockd dies at (None: the fault is done to it from outside);
    `prepare` runs on the healthy server first, `check` after it has converged."""

    name: str
    fault: str | None
    act: Callable[[Lab], object]
    prepare: Callable[[Lab], object] = lambda lab: None
    check: Callable[[Lab], object] = lambda lab: None

    @property
    def id(self) -> str:
        """The operation and the point, e.g. `restore-container.created`."""
        operation = self.name.split(":")[0].replace(" ", "-")
        return f"{operation}-{self.fault}" if self.fault else operation


def _state(lab: Lab, box: str) -> str:
    with lab.client() as c:
        return c.get_box(box).state


def _ensure(lab: Lab, state: str) -> None:
    with lab.client() as c:
        if c.get_box(lab.keep).state != state:
            (c.resume_box if state == "running" else c.stop_box)(lab.keep)


def _running(lab: Lab) -> None:
    _ensure(lab, "running")


def _stopped(lab: Lab) -> None:
    _ensure(lab, "stopped")


def _created_and_gone(name: str) -> Callable[[Lab], None]:
    """The box whose create crashed exists and runs (its row was written first); then it
    goes, to keep the lab small."""

    def check(lab: Lab) -> None:
        assert _state(lab, name) == "running"
        with lab.client() as c:
            c.delete_box(name, force=True)

    return check


def _keep_is(state: str) -> Callable[[Lab], None]:
    def check(lab: Lab) -> None:
        assert _state(lab, lab.keep) == state

    return check


def _fork_absent(lab: Lab) -> None:
    # Crashed before its row: never acknowledged, so it must not half-exist.
    assert "forked" not in lab.box_names()
    _copies_match_rows(lab)


def _copies_match_rows(lab: Lab) -> None:
    """Where disks copy: every saved disk is a snapshot's (none taken for a fork, none
    whose row the crash kept from being written)."""
    folder = DRIVES.root.parent / "paddock-disks" / "saved" / lab.srv.instance
    with lab.client() as c:
        rows = collections.Counter(
            box.id for box in c.list_boxes() for s in c.list_snapshots(box.id) if s.method == "copy"
        )
    assert collections.Counter(p.parent.name for p in folder.glob("*/*.ext4")) == rows


def _two_snapshots(lab: Lab) -> None:
    """An older snapshot to restore, and a newer one holding a marker: a box rebuilt from
    its latest snapshot instead of the one asked for would show it."""
    with lab.client() as c:
        c.snapshot_box(lab.keep)
        c.exec(lab.keep, ["touch", "/config/after-base"])
        c.snapshot_box(lab.keep)


def _restore_older(lab: Lab) -> None:
    with lab.client() as c:
        newest_first = sorted(c.list_snapshots(lab.keep), key=lambda s: -s.id)
        c.restore_box(lab.keep, newest_first[1].id)


def _restored(lab: Lab) -> None:
    with lab.client() as c:
        assert c.get_box(lab.keep).state == "running"
        left = c.exec(lab.keep, ["ls", "/config/after-base"])
    assert left.exit_code != 0, "the box is not at the snapshot it was restored to"


def _push_big(lab: Lab) -> None:
    big = lab.scratch / "big.bin"
    big.write_bytes(_blob(8 << 20))
    with lab.client() as c:
        c.push(lab.keep, [str(big)], "/config/unacked.bin")


def _big_acked(lab: Lab) -> None:
    # Big enough that the crash comes with most of the archive still unsent.
    _running(lab)
    lab.ack(lab.keep, size=8 << 20)


def _pull_all(lab: Lab) -> None:
    dest = lab.scratch / f"pulled-{uuid.uuid4().hex[:6]}"
    dest.mkdir()
    with lab.client() as c:
        c.pull(lab.keep, ACKED + "/.", dest)


def _drives(lab: Lab) -> set[str]:
    with lab.client() as c:
        return {d.name for d in c.list_drives()}


def _drive_exists(lab: Lab) -> None:
    if lab.drive not in _drives(lab):
        with lab.client() as c:
            c.create_drive(lab.drive)


def _drive_is(present: bool) -> Callable[[Lab], None]:
    def check(lab: Lab) -> None:
        assert (lab.drive in _drives(lab)) == present

    return check


def _deny(lab: Lab) -> None:
    with lab.client() as c:
        c.set_network(lab.keep, "deny-all")


def _denied_then_allowlisted(lab: Lab) -> None:
    with lab.client() as c:
        assert c.get_network(lab.keep).mode == "deny-all"
        c.set_network(lab.keep, "allowlist", [POLICY])


def _delete_tables(lab: Lab) -> None:
    for family in ("inet", "bridge", "arp"):
        subprocess.run(["nft", "delete", "table", family, lab.srv.table], check=True)


def _sdk(call: Callable[[Client, Lab], object]) -> Callable[[Lab], object]:
    def act(lab: Lab) -> object:
        with lab.client() as c:
            return call(c, lab)

    return act


def _create(name: str) -> Callable[[Lab], object]:
    return _sdk(lambda c, lab: c.create_box(name, ttl=900))


SCENARIOS = [
    Scenario("create: container made, id not saved", "container.created", _create("c1"),
             check=_created_and_gone("c1")),
    Scenario("create: started, state not saved", "container.started", _create("c2"),
             check=_created_and_gone("c2")),
    Scenario("stop: committed, no row yet", "stop.committed",
             _sdk(lambda c, lab: c.stop_box(lab.keep)), _running, _keep_is("stopped")),
    Scenario("resume: wanted, engine untouched", "resume.wanted",
             _sdk(lambda c, lab: c.resume_box(lab.keep)), _stopped, _keep_is("running")),
    Scenario("resume: started, state not saved", "container.started",
             _sdk(lambda c, lab: c.resume_box(lab.keep)), _stopped, _keep_is("running")),
    Scenario("snapshot: committed, no row yet", "snapshot.committed",
             _sdk(lambda c, lab: c.snapshot_box(lab.keep)), _running, _copies_match_rows),
    Scenario("fork: source's disk copied, no fork's row", "fork.copied",
             _sdk(lambda c, lab: c.fork_box(lab.keep, "forked")), _running, _fork_absent),
    Scenario("restore: row saved, old container not removed", "restore.saved",
             _restore_older, _two_snapshots, _restored),
    Scenario("restore: disk swapped in place, container not recorded", "restore.loaded",
             _restore_older, _two_snapshots, _restored),
    Scenario("push: mid-archive", "push.streaming", _push_big, _running),
    Scenario("pull: mid-archive", "pull.streaming", _pull_all, _big_acked),
    Scenario("drive create: volume made", "drive.created",
             _sdk(lambda c, lab: c.create_drive(lab.drive)), check=_drive_is(True)),
    Scenario("drive delete: volume removed", "drive.removed",
             _sdk(lambda c, lab: c.delete_drive(lab.drive)), _drive_exists, _drive_is(False)),
    Scenario("network change: saved, not synced", "network.saved", _deny, _running,
             _denied_then_allowlisted),
    Scenario("nft tables of the instance deleted", None, _delete_tables, _running),
]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    scenario: str
    converged_s: float
    lost: list[str]
    checked: int  # acknowledged files looked for


def open_lab(srv: Server) -> Lab:
    """The lab's standing box, under an allowlist, holding one acknowledged file."""
    lab = Lab(srv)
    with lab.client() as c:
        c.create_box(lab.keep, ttl=0, network="allowlist", allow=[POLICY])
    lab.ack(lab.keep)
    return lab


def run(lab: Lab, scenario: Scenario) -> Outcome:
    """One fault: an acknowledged write first, then the fault, the restart, convergence,
    and what was lost."""
    _running(lab)
    lab.ack(lab.keep)
    scenario.prepare(lab)
    if scenario.fault is None:
        started = time.monotonic()
        scenario.act(lab)
        lab.converge()
        seconds = time.monotonic() - started
    else:
        lab.crash(scenario.fault, scenario.act)
        seconds = lab.restart()
    lost = lab.lost()
    scenario.check(lab)
    return Outcome(scenario.name, seconds, lost, lab.acked_count)


def close_lab(lab: Lab) -> None:
    with contextlib.suppress(Exception), lab.client() as c:
        if lab.drive in {d.name for d in c.list_drives()}:
            c.delete_drive(lab.drive)
    shutil.rmtree(lab.scratch, ignore_errors=True)
