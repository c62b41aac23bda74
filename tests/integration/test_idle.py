"""Idle stop against a real paddockd: a box nobody uses stops after its idle time (its
files kept), a box with a command running does not, and `--wake` starts a stopped box for
the command that needs it. (The shortest idle time is a minute; this server allows 5 s.)"""

from __future__ import annotations

import subprocess
import time

from ..harness import Server


def test_an_unused_box_stops_a_box_in_use_does_not_and_wake_brings_it_back(
    make_server: type[Server],
) -> None:
    server = make_server(idle_stop_min=5)
    too_short = server.cli("new", "--name", "hasty", "--idle-stop", "4s")
    assert too_short.returncode != 0 and "an idle stop is 5 s to" in too_short.stderr
    for name in ("idler", "worker"):
        server.cli("new", "--name", name, "--ttl", "0", "--idle-stop", "5s", check=True)
    server.cli("exec", "idler", "--", "sh", "-c", "echo kept > /config/note", check=True)
    busy = subprocess.Popen(
        server.cli_argv("exec", "worker", "--", "sleep", "120"),
        env=server.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with server.client() as c:
            assert c.get_box("idler").idle_stop == 5
            deadline = time.monotonic() + 60
            while c.get_box("idler").state != "stopped":
                assert time.monotonic() < deadline, "the idle box was not stopped"
                assert c.get_box("worker").state == "running"
                time.sleep(1)
            # The worker's command is still running: the worker is in use.
            assert busy.poll() is None and c.get_box("worker").state == "running"
        refused = server.cli("exec", "idler", "--", "true")
        assert refused.returncode == 125 and "paddock resume idler" in refused.stderr
        woke = server.cli("exec", "--wake", "idler", "--", "cat", "/config/note")
        assert woke.returncode == 0 and woke.stdout == "kept\n", woke.stderr
    finally:
        busy.kill()
        busy.wait()
        for name in ("idler", "worker"):
            server.cli("rm", "--force", name)
