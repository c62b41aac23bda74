"""State a crash can leave behind — torn records, images without a row — never stops
paddockd from starting, and is tidied up by it, on the real engine."""

from __future__ import annotations

import json
import time

from paddockd.domain.runs import Run

from .conftest import Server


def _record(box_id: str, run_id: str, status: str) -> str:
    return Run(
        run_id, box_id, "keeper", "claude", "hi", "/config", None, status, time.time()
    ).to_json()


def test_torn_run_records_and_logs_never_stop_a_start(make_server) -> None:  # type: ignore[no-untyped-def]
    srv: Server = make_server()
    with srv.client() as c:
        box_id = c.create_box("keeper", ttl=900).id
    srv.kill()
    runs = srv.dir / "data" / "runs"
    runs.mkdir(exist_ok=True)
    # What an older paddockd left: a whole record, one cut short mid-write, one garbled,
    # and a log whose last line was cut short.
    (runs / "aaa111.json").write_text(_record(box_id, "aaa111", "succeeded"))
    (runs / "bbb222.json").write_text(_record(box_id, "bbb222", "running"))
    (runs / "bbb222.log").write_text('{"seq": 1, "stream": "stdout", "data": "hi"}\n{"seq": 2, "st')
    (runs / "ccc333.json").write_text(_record(box_id, "ccc333", "succeeded")[:30])
    (runs / "ddd444.json").write_bytes(b"\x00\xff\x00")
    srv.start()

    listed = json.loads(srv.cli("runs", "keeper", "--json", check=True).stdout)
    assert [(r["id"], r["status"]) for r in listed] == [("aaa111", "succeeded"), ("bbb222", "lost")]
    followed = srv.cli("runs", "follow", "bbb222")
    assert followed.stdout.startswith("hi"), followed
    log = (srv.dir / "paddockd.log").read_text()
    assert "skipped a run record: ccc333.json" in log
    assert "skipped a run record: ddd444.json" in log
    assert (runs / "ccc333.json.broken").exists() and not (runs / "aaa111.json").exists()

    # The next start has nothing more to say: the records live in the database now.
    srv.kill()
    srv.start()
    assert len(json.loads(srv.cli("runs", "keeper", "--json", check=True).stdout)) == 2
    assert (srv.dir / "paddockd.log").read_text().count("ccc333.json") == 1
