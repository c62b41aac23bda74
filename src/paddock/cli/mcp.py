"""`paddock mcp`: an MCP server over stdio (the official `mcp` SDK) that gives MCP-capable
agents the same operations as the CLI: boxes, exec, files, snapshots, the desktop."""

# No `from __future__ import annotations` here: the MCP SDK reads the tools' annotations
# at run time, and they name classes imported inside build_server.
import argparse
from typing import Any

from ..wire.errors import PaddockError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sub.add_parser(
        "mcp",
        help="run an MCP server (stdio) exposing Paddock to MCP-capable agents",
        description="Serve Paddock's operations as MCP tools over stdio: new, ls, exec, push, "
        "pull, stop, resume, fork, rm, screenshot, desktop_click, desktop_type, desktop_key, "
        "prompt. "
        "Uses the server and token of `paddock login` (or PADDOCK_URL/PADDOCK_TOKEN). "
        "Needs the `mcp` package: pip install 'paddock[mcp]'.",
        epilog="to add it to Claude Code:\n  claude mcp add paddock -- paddock mcp",
        run=cmd_mcp,
    )


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        server = build_server(getattr(args, "url", None))
    except ImportError:
        raise PaddockError(
            "`paddock mcp` needs the MCP SDK: pip install 'paddock[mcp]' (or: pip install mcp)"
        ) from None
    server.run()
    return 0


def build_server(url: str | None = None) -> Any:
    import anyio.to_thread
    from mcp.server.mcpserver import Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from .._client import Client
    from ..wire.models import to_wire

    server = MCPServer(
        "paddock",
        instructions="Isolated Linux boxes for running code: create one with `new`, copy "
        "files with `push`/`pull`, run commands with `exec`, look at its desktop with "
        "`screenshot`, and stop or delete it when done.",
    )
    client = Client(url=url)

    async def call(fn: Any, *a: Any, **kw: Any) -> Any:
        # The SDK client is synchronous; keep the MCP event loop free while it waits.
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*a, **kw))
        except PaddockError as exc:  # the agent sees Paddock's own message
            raise ToolError(exc.message) from None

    def outcome(result: Any) -> dict[str, Any]:
        return {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}

    @server.tool()
    async def new(
        name: str | None = None, box_type: str | None = None, ttl: int | None = None
    ) -> dict[str, Any]:
        """Create and start a box; returns it (its name is how to address it)."""
        return dict(to_wire(await call(client.create_box, name, box_type=box_type, ttl=ttl)))

    @server.tool()
    async def ls() -> list[dict[str, Any]]:
        """List boxes: name, state, type, expiry."""
        return [dict(to_wire(b)) for b in await call(client.list_boxes)]

    @server.tool()
    async def exec(box: str, command: str, workdir: str | None = None) -> dict[str, Any]:  # noqa: A001
        """Run a shell command (bash -lc) in the box to completion: exit code and output."""
        return outcome(await call(client.exec, box, command, workdir=workdir))

    @server.tool()
    async def push(box: str, sources: list[str], dest: str) -> dict[str, Any]:
        """Copy local files or folders into the box under dest."""
        return dict(to_wire(await call(client.push, box, sources, dest)))

    @server.tool()
    async def pull(box: str, src: str, dest: str) -> str:
        """Copy a file or folder out of the box to a local path; returns where it went."""
        return str(await call(client.pull, box, src, dest))

    @server.tool()
    async def stop(box: str) -> dict[str, Any]:
        """Stop a box; its files are kept (a snapshot) until it is resumed."""
        return dict(to_wire(await call(client.stop_box, box)))

    @server.tool()
    async def resume(box: str) -> dict[str, Any]:
        """Start a stopped box again from its files."""
        return dict(to_wire(await call(client.resume_box, box)))

    @server.tool()
    async def fork(box: str, name: str | None = None) -> dict[str, Any]:
        """A new box with a copy of this box's files."""
        return dict(to_wire(await call(client.fork_box, box, name)))

    @server.tool()
    async def rm(box: str) -> str:
        """Delete a box and its snapshots."""
        await call(client.delete_box, box, force=True)
        return f"deleted {box}"

    @server.tool()
    async def screenshot(box: str, size: str | None = None) -> Image:
        """A PNG of the box's desktop (started if need be); size like 1280x800."""
        return Image(data=await call(client.screenshot, box, size=size), format="png")

    @server.tool()
    async def desktop_click(box: str, x: int, y: int, button: int = 1) -> str:
        """Click at pixel (x, y) of the box's desktop."""
        await call(client.desktop_click, box, x, y, button=button)
        return "clicked"

    @server.tool()
    async def desktop_type(box: str, text: str) -> str:
        """Type text into the focused window of the box's desktop."""
        await call(client.desktop_type, box, text)
        return "typed"

    @server.tool()
    async def desktop_key(box: str, keys: str) -> str:
        """Press a key or combination (xdotool names: Return, ctrl+s, alt+F4)."""
        await call(client.desktop_key, box, keys)
        return "pressed"

    @server.tool()
    async def prompt(
        box: str,
        instruction: str,
        agent: str | None = None,
        workdir: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """Run a coding agent (claude, codex, opencode, pi, kimi; prime is a one-shot chat)
        headless in the box to completion with the instruction: its exit code and output."""
        return outcome(
            await call(client.prompt, box, instruction, agent=agent, workdir=workdir, model=model)
        )

    return server
