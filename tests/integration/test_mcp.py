"""`paddock mcp` driven by the MCP SDK's own client over stdio, against a real server."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from .conftest import PADDOCK, Server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text_of(result: object) -> str:
    return "".join(getattr(c, "text", "") for c in getattr(result, "content", []))


@asynccontextmanager
async def mcp_session(server: Server) -> AsyncIterator[ClientSession]:
    """`paddock mcp` as an MCP client starts it: a child process speaking stdio."""
    params = StdioServerParameters(
        command=PADDOCK,
        args=["mcp"],
        env={"PADDOCK_URL": server.url, "PADDOCK_TOKEN": server.token},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_mcp_tools_drive_boxes(server: Server) -> None:
    name = f"mcp-{uuid.uuid4().hex[:6]}"
    with anyio.fail_after(240):
        async with mcp_session(server) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {
                "new",
                "ls",
                "exec",
                "push",
                "pull",
                "stop",
                "resume",
                "fork",
                "screenshot",
                "desktop_click",
                "desktop_type",
                "desktop_key",
                "prompt",
            } <= tools
            created = await session.call_tool("new", {"name": name, "box_type": "medium"})
            assert not created.is_error and name in text_of(created)
            try:
                listed = await session.call_tool("ls", {})
                assert name in text_of(listed)
                ran = await session.call_tool(
                    "exec", {"box": name, "command": "echo from-mcp; exit 3"}
                )
                out = json.loads(text_of(ran))
                assert out["exit_code"] == 3 and out["stdout"] == "from-mcp\n"
                shot = await session.call_tool("screenshot", {"box": name})
                image = next(c for c in shot.content if getattr(c, "type", "") == "image")
                assert base64.b64decode(image.data)[:8] == b"\x89PNG\r\n\x1a\n"
                missing = await session.call_tool("exec", {"box": "no-such-box", "command": "true"})
                assert missing.is_error and "no-such-box" in text_of(missing)
            finally:
                await session.call_tool("rm", {"box": name})
