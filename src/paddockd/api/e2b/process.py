"""envd's `process` service over Connect: commands run through BoxService.exec, kept in a
ProcessRegistry so they can be listed, fed, signalled, resized and attached to again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from e2b.envd.process import process_connect
from e2b.envd.process import process_pb as pb
from protobuf import Oneof

from ...domain.box import Desired
from ...domain.errors import InvalidRequest
from ...runtime import inbox
from ...services.e2b.processes import EnvdProcess, Listener, Output, ProcessRegistry
from ...services.e2b.service import E2BService
from .envd import Target, keepalive, target

# Each envd command first notes its pid in the box (runtime/inbox.py's `noted`), so a
# signal can reach it and all it started, sent in the box as root. (The engine's own kill
# goes by the exec's host pid, which did not reach a non-TTY command.)


def _name(pid: int) -> str:
    return f"e2b-{pid}"


def _event(item: Output | None) -> pb.ProcessEvent:
    if item is None:
        alive: Oneof[Literal["keepalive"], pb.ProcessEvent.KeepAlive]
        alive = Oneof("keepalive", pb.ProcessEvent.KeepAlive())
        return pb.ProcessEvent(event=alive)
    if item.kind == "end":
        end: Oneof[Literal["end"], pb.ProcessEvent.EndEvent] = Oneof(
            "end",
            pb.ProcessEvent.EndEvent(
                exit_code=item.exit_code,
                exited=item.exit_code >= 0,
                status=f"exit status {item.exit_code}",
            ),
        )
        return pb.ProcessEvent(event=end)
    if item.kind == "pty":
        pty: Oneof[Literal["pty"], bytes] = Oneof("pty", item.data)
        data = pb.ProcessEvent.DataEvent(output=pty)
    elif item.kind == "stderr":
        err: Oneof[Literal["stderr"], bytes] = Oneof("stderr", item.data)
        data = pb.ProcessEvent.DataEvent(output=err)
    else:
        out: Oneof[Literal["stdout"], bytes] = Oneof("stdout", item.data)
        data = pb.ProcessEvent.DataEvent(output=out)
    event: Oneof[Literal["data"], pb.ProcessEvent.DataEvent] = Oneof("data", data)
    return pb.ProcessEvent(event=event)


def _started(pid: int) -> pb.ProcessEvent:
    start: Oneof[Literal["start"], pb.ProcessEvent.StartEvent]
    start = Oneof("start", pb.ProcessEvent.StartEvent(pid=pid))
    return pb.ProcessEvent(event=start)


class ProcessService(process_connect.Process):
    """Implements e2b's generated `process_connect.Process` protocol."""

    def __init__(self, e2b: E2BService, registry: ProcessRegistry) -> None:
        self._e2b = e2b
        self._registry = registry

    async def _target(self, ctx: RequestContext[object, object]) -> Target:
        return await target(self._e2b, ctx.request_headers.get)

    def _select(self, t: Target, selector: pb.ProcessSelector | None) -> EnvdProcess:
        match selector.selector if selector is not None else None:
            case Oneof(field="pid", value=pid):
                return self._registry.find(t.box.id, pid=int(pid))
            case Oneof(field="tag", value=tag):
                return self._registry.find(t.box.id, tag=str(tag))
        raise InvalidRequest("a process selector (pid or tag) is required")

    async def list(self, request: pb.ListRequest, ctx: RequestContext) -> pb.ListResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        return pb.ListResponse(
            processes=[
                pb.ProcessInfo(
                    config=pb.ProcessConfig(cmd=p.cmd, args=p.args, envs=p.envs, cwd=p.cwd),
                    pid=p.pid,
                    tag=p.tag,
                )
                for p in self._registry.listed(t.box.id)
            ]
        )

    async def start(
        self,
        request: pb.StartRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.StartResponse]:
        t = await self._target(ctx)
        config = request.process or pb.ProcessConfig()
        pty = request.pty
        size = None
        if pty is not None and pty.size is not None:
            size = (int(pty.size.cols), int(pty.size.rows))
        stdin = bool(request.stdin) or pty is not None
        cwd = config.cwd or None
        pid = self._registry.next_pid()
        envs = {**await self._e2b.env_vars(t.box.id), **dict(config.envs)}
        proc = await self._e2b.boxes.exec(
            t.box.id,
            inbox.noted(_name(pid), [config.cmd, *config.args]),
            envs,
            cwd,
            t.user,
            tty=pty is not None,
            stdin=stdin,
            size=size,
            caller=t.caller,
        )
        p = self._registry.add(
            pid,
            t.box.id,
            proc,
            config.cmd,
            list(config.args),
            dict(config.envs),
            cwd,
            request.tag if request.has_field("tag") else None,
            pty is not None,
            stdin,
        )
        queue = p.subscribe()
        self._registry.start(p)
        yield pb.StartResponse(event=_started(p.pid))
        async for event in self._events(t, p, queue, ctx):
            yield pb.StartResponse(event=event)

    async def connect(
        self,
        request: pb.ConnectRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.ConnectResponse]:
        t = await self._target(ctx)
        p = self._select(t, request.process)
        queue = p.subscribe()
        yield pb.ConnectResponse(event=_started(p.pid))
        async for event in self._events(t, p, queue, ctx):
            yield pb.ConnectResponse(event=event)

    async def _events(
        self,
        t: Target,
        p: EnvdProcess,
        queue: Listener,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> AsyncIterator[pb.ProcessEvent]:
        """The process's events. One ended by its sandbox going (killed, paused) ends the
        stream as envd's does, unfinished: the SDK then finds the sandbox not running."""
        async for item in self._registry.events(p, queue, keepalive(ctx.request_headers.get)):
            if item is not None and item.kind == "end":
                box = await self._e2b.boxes.get(t.box.id)
                if box is None or box.desired != Desired.RUNNING:
                    raise ConnectError(
                        Code.UNAVAILABLE,
                        f"the connection to sandbox {t.box.id} ended before the stream completed",
                    )
            yield _event(item)

    async def update(self, request: pb.UpdateRequest, ctx: RequestContext) -> pb.UpdateResponse:  # type: ignore[type-arg]
        t = await self._target(ctx)
        p = self._select(t, request.process)
        if request.pty is None or request.pty.size is None:
            raise InvalidRequest("only a PTY's size can be updated")
        if not p.pty:
            raise InvalidRequest(f"process {p.pid} has no PTY")
        await p.proc.resize(int(request.pty.size.cols), int(request.pty.size.rows))
        return pb.UpdateResponse()

    async def _write(self, p: EnvdProcess, data: pb.ProcessInput | None) -> None:
        if not p.stdin:
            raise InvalidRequest(f"process {p.pid} was started without stdin (stdin=True)")
        match data.input if data is not None else None:
            case Oneof(field="stdin" | "pty", value=chunk):
                await p.proc.write(bytes(chunk))

    async def send_input(
        self,
        request: pb.SendInputRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.SendInputResponse:
        t = await self._target(ctx)
        await self._write(self._select(t, request.process), request.input)
        return pb.SendInputResponse()

    async def stream_input(
        self,
        request: AsyncIterator[pb.StreamInputRequest],
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.StreamInputResponse:
        t = await self._target(ctx)
        p: EnvdProcess | None = None
        async for message in request:
            value = message.event.value if message.event is not None else None
            if isinstance(value, pb.StreamInputRequest.StartEvent):
                p = self._select(t, value.process)
            elif isinstance(value, pb.StreamInputRequest.DataEvent) and p is not None:
                await self._write(p, value.input)
        return pb.StreamInputResponse()

    async def send_signal(
        self,
        request: pb.SendSignalRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.SendSignalResponse:
        t = await self._target(ctx)
        p = self._select(t, request.process)
        sig = "TERM" if request.signal == pb.Signal.SIGTERM else "KILL"
        await self._e2b.boxes.signal(t.box.id, _name(p.pid), sig, t.caller)
        return pb.SendSignalResponse()

    async def close_stdin(
        self,
        request: pb.CloseStdinRequest,
        ctx: RequestContext,  # type: ignore[type-arg]
    ) -> pb.CloseStdinResponse:
        t = await self._target(ctx)
        await self._select(t, request.process).proc.close_stdin()
        return pb.CloseStdinResponse()


__all__ = ["ConnectError", "ProcessService"]
