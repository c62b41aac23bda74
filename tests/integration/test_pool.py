"""The warm pool on the real engine: a claim is the box's own and fresh, the pool refills,
respects the capacity, survives paddockd restarts, and holds under parallel `new`s."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import docker

from paddock import Client

from ..harness import wait_for
from .conftest import ENGINE_SOCKET, Server

POOLED = "paddock.pool"


def ready(c: Client) -> dict[str, int]:
    pool = c.status().pool
    assert pool is not None
    return {t.type: t.ready for t in pool.types}


def wait_ready(c: Client, want: dict[str, int], timeout: float = 60.0) -> None:
    wait_for(lambda: ready(c) == want, timeout, f"the pool to hold {want}")


def unclaimed(srv: Server, c: Client) -> dict[str, str]:
    """The pool's containers that are no box (yet): box id -> container id."""
    boxes = {b.id for b in c.list_boxes()}
    return {
        str(info["Labels"]["paddock.box"]): str(info["Id"])
        for info in srv.containers()
        if info["Labels"].get(POOLED) and info["Labels"]["paddock.box"] not in boxes
    }


def ip_of(container: str) -> str:
    """The container's address on its server's bridge."""
    api = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    networks = api.inspect_container(container)["NetworkSettings"]["Networks"]
    return str(next(iter(networks.values()))["IPAddress"])


def nft_set(srv: Server, name: str) -> str:
    return subprocess.run(
        ["nft", "list", "set", "inet", srv.table, name], capture_output=True, text=True
    ).stdout


def test_a_claim_is_the_boxs_own_and_fresh(make_server: type[Server]) -> None:
    srv = make_server(pool_types={"small": 2})
    with srv.client() as c:
        wait_ready(c, {"small": 2})
        pooled = unclaimed(srv, c)
        # A ready box has no network: no rule names its address.
        ip = ip_of(next(iter(pooled.values())))
        assert ip and ip not in nft_set(srv, "boxes")

        first = c.create_box("first", ttl=600, network="deny-all")
        assert first.id in pooled  # claimed, not made
        # Its first command is its exec agent's, started with it (no engine exec: runc's
        # leaves the command a parent outside the box, pid 0 here).
        ran_by = c.exec("first", ["sh", "-c", "cat /proc/$PPID/comm"]).stdout
        assert ran_by == "paddock-agent\n"
        script = (
            "hostname; cat /etc/hostname; grep -c first /etc/hosts; "
            f"grep -c {first.id} /etc/hosts || true; printenv PADDOCK_BOX"
        )
        assert srv.sh("first", script).split() == ["first", "first", "1", "0", "first"]
        assert ip_of(f"paddock-{first.id}") in nft_set(srv, "deny_all")  # its policy, at once
        srv.sh("first", "echo mine > /config/marker; sudo sh -c 'echo x > /etc/first-was-here'")
        srv.cli("rm", "--force", "first", check=True)

        # The pool refills with a fresh box; the claimed one is never pooled again.
        wait_ready(c, {"small": 2})
        now = unclaimed(srv, c)
        assert first.id not in now and len(set(now) - set(pooled)) == 1
        second = c.create_box("second", ttl=600)
        assert second.id in now and second.id != first.id
        script = (
            "hostname; ls /config/marker /etc/first-was-here 2>&1 | grep -c 'No such'; "
            "grep -c first /etc/hosts || true"
        )
        assert srv.sh("second", script).split() == ["second", "2", "0"]
        assert ip_of(f"paddock-{second.id}") in nft_set(srv, "boxes")
        assert ip_of(f"paddock-{second.id}") not in nft_set(srv, "deny_all")
        # Stopped and resumed, the engine names it as it was made: paddockd renames it.
        c.stop_box("second")
        c.resume_box("second")
        assert srv.sh("second", "hostname; cat /etc/hostname").split() == ["second"] * 2
        wait_ready(c, {"small": 2})
        status = json.loads(srv.cli("status", "--json", check=True).stdout)
        assert status["pool"]["types"] == [{"type": "small", "size": 2, "ready": 2, "making": 0}]
        assert "pool:      2/2 small ready" in srv.cli("status", check=True).stdout


def test_the_pool_gives_its_room_to_boxes_and_takes_only_whats_left(
    make_server: type[Server],
) -> None:
    srv = make_server(pool_types={"small": 3}, capacity_cpus=4, capacity_memory_mb=4096)
    with srv.client() as c:
        wait_ready(c, {"small": 3})
        # A medium box needs all the memory: the pool gives up every ready box.
        big = c.create_box("big", box_type="medium", ttl=600)
        assert big.id not in unclaimed(srv, c) and big.state == "running"
        wait_for(lambda: unclaimed(srv, c) == {}, 30, "the pool's boxes to go")
        time.sleep(3)  # and it makes none while there is no room
        pool = c.status().pool
        assert pool is not None and ready(c) == {"small": 0} and pool.memory_mb == 0
        assert pool.note and "no room" in pool.note
        c.delete_box("big", force=True)
        wait_ready(c, {"small": 3})
        # A small box without drives claims one; the pool makes up for it only once
        # there is room again (4 GiB: the box and three ready boxes).
        c.create_box("one", ttl=600)
        wait_ready(c, {"small": 3})
        c.create_box("two", ttl=600, drives=["scratch"])  # cannot claim: made, room taken
        wait_for(lambda: len(unclaimed(srv, c)) == 2, 30, "one ready box to give way")
        assert ready(c) == {"small": 2}


def test_a_restart_adopts_ready_boxes_or_removes_them(make_server: type[Server]) -> None:
    srv = make_server(pool_types={"small": 2})
    with srv.client() as c:
        wait_ready(c, {"small": 2})
        pooled = unclaimed(srv, c)
    srv.kill()
    srv.start()
    with srv.client() as c:
        wait_ready(c, {"small": 2}, 30)
        assert unclaimed(srv, c) == pooled  # the same containers, adopted
        claimed = c.create_box("after", ttl=600)
        assert claimed.id in pooled and srv.sh("after", "hostname").strip() == "after"
        wait_ready(c, {"small": 2})
    # Fewer ready boxes wanted: the surplus goes.
    srv.kill()
    srv.config.write_text(srv.config.read_text().replace("small = 2", "small = 1"))
    srv.start()
    with srv.client() as c:
        wait_for(lambda: len(unclaimed(srv, c)) == 1, 30, "the surplus to go")
        assert ready(c) == {"small": 1}
        assert srv.sh("after", "hostname").strip() == "after"  # boxes are not the pool's


def test_a_claim_cut_short_by_a_crash_is_finished_on_restart(make_server: type[Server]) -> None:
    srv = make_server(pool_types={"small": 1})
    with srv.client() as c:
        wait_ready(c, {"small": 1})
        pooled = unclaimed(srv, c)
    srv.kill()
    srv.start(fault="pool.claimed")
    with srv.client() as c:
        wait_ready(c, {"small": 1}, 30)  # adopted
        with contextlib.suppress(Exception):  # the answer never comes: paddockd is dead
            c.create_box("cut", ttl=600, network="deny-all")
    assert srv.died()
    srv.start()
    with srv.client() as c:
        wait_for(lambda: c.get_box("cut").state == "running", 30, "the claim to finish")
        box = c.get_box("cut")
        assert box.id in pooled
        assert srv.sh("cut", "hostname; cat /etc/hostname").split() == ["cut", "cut"]
        wait_for(lambda: ip_of(f"paddock-{box.id}") in nft_set(srv, "deny_all"), 10)


def test_twenty_parallel_news_get_twenty_distinct_working_boxes(
    make_server: type[Server],
) -> None:
    srv = make_server(pool_types={"small": 3})
    with srv.client() as c:
        wait_ready(c, {"small": 3})
        pooled = set(unclaimed(srv, c))

    def new(i: int) -> tuple[str, str]:
        with srv.client() as c:
            box = c.create_box(f"par-{i}", ttl=600)
            got = c.exec(box.name, "hostname; cat /etc/hostname; echo $PADDOCK_BOX")
            assert got.exit_code == 0, got.stderr
            return box.id, got.stdout

    with ThreadPoolExecutor(20) as workers:
        made = list(workers.map(new, range(20)))
    ids = [box_id for box_id, _ in made]
    assert len(set(ids)) == 20
    assert len(set(ids) & pooled) == 3  # each ready box claimed once, the rest made
    for i, (_, out) in enumerate(made):
        assert out.split() == [f"par-{i}"] * 3
    with srv.client() as c:
        for box_id in ids:
            c.delete_box(box_id, force=True)


def test_the_pool_keeps_boxes_of_a_template(make_server: type[Server]) -> None:
    srv = make_server(pool_types={}, pool_templates={"tools": 1})
    with srv.client() as c:
        if c.status().snapshots != "copy":
            return  # templates need copy-on-write disk copies (test_templates.py skips too)
        c.create_box("prep", ttl=600)
        srv.sh("prep", "sudo sh -c 'echo from-the-template > /opt/tools-marker'")
        c.create_template("tools", "prep", start_cmd="touch /tmp/started-at-boot")
        c.delete_box("prep", force=True)
        wait_ready(c, {"template:tools": 1})
        pooled = unclaimed(srv, c)
        box = c.create_box("from-tools", ttl=600, template="tools")
        assert box.id in pooled  # claimed, not made
        assert srv.sh("from-tools", "cat /opt/tools-marker") == "from-the-template\n"
        wait_for(lambda: srv.sh("from-tools", "ls /tmp").count("started-at-boot") == 1)
        # A box of the box image is never given a template's box.
        wait_ready(c, {"template:tools": 1})
        plain = c.create_box("plain", ttl=600)
        assert plain.id not in unclaimed(srv, c) | pooled
        assert "No such file" in srv.sh("plain", "cat /opt/tools-marker 2>&1 || true")
