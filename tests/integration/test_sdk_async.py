"""`AsyncClient` against a real server: the same operations as `Client`, awaited."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from paddock import AsyncClient, ExecEvent, NotFound

from .conftest import Server


def test_the_async_client_drives_a_box_end_to_end(server: Server, tmp_path: Path) -> None:
    async def scenario() -> None:
        name = f"async-{uuid.uuid4().hex[:6]}"
        async with AsyncClient(url=server.url, token=server.token) as c:
            assert (await c.health())["status"] == "ok"
            box = await c.create_box(name, ttl=600, network="deny-all")
            try:
                assert (await c.get_box(box.id)).name == name
                assert name in {b.name for b in await c.list_boxes()}
                result = await c.exec(name, "echo out; echo err >&2; exit 3")
                assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
                stream = c.exec_stream(name, ["sh", "-c", "printf x; exit 4"])
                assert [e async for e in stream] == [ExecEvent(("stdout", b"x"))]
                assert stream.exit_code == 4
                session = await c.exec_session(name, ["cat"])
                await session.send(b"typed\n")
                await session.close_stdin()
                echoed = b"".join([data async for _, data in session])
                await session.close()
                assert (echoed, session.exit_code) == (b"typed\n", 0)
                pid, log = await c.start(name, "echo started; sleep 30")
                assert (await c.exec(name, f"kill -0 {pid} && cat {log}")).stdout == "started\n"
                src = tmp_path / "src"
                (src / "sub").mkdir(parents=True)
                (src / "sub" / "f.txt").write_text("hello")
                pushed = await c.push(name, [src], "/config/p")
                assert pushed.bytes >= 5
                pulled = await c.pull(name, "/config/p", tmp_path / "back")
                assert (pulled / "sub" / "f.txt").read_text() == "hello"
                assert (await c.get_network(name)).mode == "deny-all"
                await c.set_network(name, "allow-all")
                snap = await c.snapshot_box(name, "one")
                assert snap.label == "one" and await c.list_snapshots(name)
                extended = await c.extend_box(name, 1200)
                assert extended.expires_at is not None
                assert (await c.status()).boxes_running >= 1
                assert await c.box_credentials(name) == []
            finally:
                await c.delete_box(name, force=True)
            with pytest.raises(NotFound):
                await c.get_box(name)

    asyncio.run(scenario())
