"""The older pinned E2B SDK (2.45.1, which checks the key's format) against a real server:
the calls most E2B code makes, run by that SDK in a venv of its own (scripts/test makes it;
one venv cannot hold two versions). The newer SDK's suite is test_e2b.py."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ..harness import Server, e2b_python_env

OLD_PYTHON = os.environ.get("PADDOCK_E2B_OLD_PYTHON", "")

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not OLD_PYTHON, reason="scripts/test sets PADDOCK_E2B_OLD_PYTHON"),
]

# Runs in the old SDK's venv; prints one JSON object of what it saw.
_SCRIPT = r"""
import json, importlib.metadata as m
import e2b
seen = {"version": m.version("e2b")}
sbx = e2b.Sandbox.create(metadata={"suite": "old"}, envs={"GREETING": "hi"}, timeout=300)
try:
    run = sbx.commands.run("echo $GREETING; id -un; pwd")
    seen["run"] = run.stdout.split()
    sbx.files.write("notes/a.txt", "one")
    sbx.files.write_files([{"path": "notes/b.txt", "data": b"two"}])
    seen["read"] = sbx.files.read("notes/a.txt")
    seen["list"] = [e.name for e in sbx.files.list("notes")]
    sbx.files.remove("notes/missing.txt")
    seen["info"] = sbx.get_info().metadata
    listed = e2b.Sandbox.list(query=e2b.SandboxQuery(metadata={"suite": "old"}))
    seen["listed"] = [s.sandbox_id == sbx.sandbox_id for s in listed.next_items()]
    seen["host"] = [sbx.get_host(8000), sbx.sandbox_id]
    sbx.update_network({"deny_out": ["0.0.0.0/0"]})
    seen["metrics"] = len(sbx.get_metrics()) >= 1
    private = e2b.Sandbox.create(network={"allow_public_traffic": False}, timeout=300)
    seen["traffic_token"] = (private.traffic_access_token or "")[:4]
    private.kill()
    # The differences the parity issue listed, as this SDK sees them.
    seen["proc"] = len(sbx.files.read("/proc/sys/kernel/random/boot_id").strip())
    sbx.files.make_dir("order/b")
    sbx.files.write("order/a.txt", "x")
    seen["order"] = [e.name for e in sbx.files.list("order")]
    snap = sbx.create_snapshot()
    seen["snapshot_deleted"] = e2b.Sandbox.delete_snapshot(snap.snapshot_id)
    newest = e2b.Sandbox.create(metadata={"suite": "old"}, timeout=300)
    ids = [s.sandbox_id for s in e2b.Sandbox.list(query=e2b.SandboxQuery(metadata={"suite": "old"})).next_items()]
    seen["newest_first"] = ids.index(newest.sandbox_id) < ids.index(sbx.sandbox_id)
    newest.kill()
    end = sbx.get_info().end_at
    e2b.Sandbox.connect(sbx.sandbox_id, timeout=10)
    seen["not_shortened"] = sbx.get_info().end_at >= end
    try:
        e2b.Sandbox.create(mcp={"exa": {"apiKey": "x"}}, timeout=60)
        seen["mcp"] = "made"
    except Exception as exc:
        seen["mcp"] = str(exc)
    sbx.set_timeout(120)
    sbx.pause()
    seen["paused_running"] = sbx.is_running()
    again = e2b.Sandbox.connect(sbx.sandbox_id)
    seen["resumed"] = again.commands.run("cat notes/b.txt").stdout
finally:
    sbx.kill()
name = "old-" + seen["host"][1][:8]
made = e2b.Secret.create(name, "old-value")
seen["secret"] = [made.version, e2b.Secret.update(name, "newer").version, e2b.Secret.exists(name)]
e2b.Secret.destroy(name)
vol = e2b.Volume.create(name)
try:
    vol.write_file("/d/f.txt", "old sdk", force=True)
    seen["volume"] = [vol.read_file("/d/f.txt"), [e.name for e in vol.list("/d")]]
finally:
    e2b.Volume.destroy(vol.volume_id)
print(json.dumps(seen))
"""


def test_the_older_sdk_works_with_the_key_paddock_prints(server: Server) -> None:
    with e2b_python_env(server) as env:
        assert env["E2B_API_KEY"].startswith("e2b_")  # the form 2.45 insists on
        done = subprocess.run(
            [OLD_PYTHON, "-c", _SCRIPT],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["version"] == "2.45.1"
    assert seen["run"] == ["hi", "abc", "/config"]  # the box user; /home/user is its home too
    assert seen["read"] == "one" and sorted(seen["list"]) == ["a.txt", "b.txt"]
    assert seen["info"] == {"suite": "old"} and seen["listed"] == [True]
    assert seen["paused_running"] is False and seen["resumed"] == "two"
    host, sandbox_id = seen["host"]
    assert host == f"8000-{sandbox_id}.localhost:{server.url.rsplit(':', 1)[1]}"
    assert seen["metrics"] is True and seen["traffic_token"] == "pdt_"
    assert seen["proc"] == 36 and seen["order"] == ["a.txt", "b"]  # by name, as envd
    assert seen["snapshot_deleted"] is True and seen["newest_first"] is True
    assert seen["not_shortened"] is True and "not supported by Paddock: mcp" in seen["mcp"]
    assert seen["secret"] == [1, 2, True]
    assert seen["volume"] == ["old sdk", ["f.txt"]]


def test_the_older_sdk_refuses_a_plain_token_as_it_always_did(server: Server) -> None:
    """What the docs say of it: the plain token needs E2B_VALIDATE_API_KEY=false there."""
    with e2b_python_env(server) as env:
        plain = {**os.environ, **env, "E2B_API_KEY": server.token}
        script = "import e2b; e2b.Sandbox.list().next_items(); print('listed')"
        refused = subprocess.run(
            [OLD_PYTHON, "-c", script], env=plain, capture_output=True, text=True, timeout=60
        )
        assert refused.returncode != 0 and "Invalid API key format" in refused.stderr
        allowed = subprocess.run(
            [OLD_PYTHON, "-c", script],
            env={**plain, "E2B_VALIDATE_API_KEY": "false"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert allowed.returncode == 0 and "listed" in allowed.stdout, allowed.stderr[-2000:]
