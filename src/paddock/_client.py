"""`Client` (blocking) and `AsyncClient` over one description of each operation.

Each API operation is described once, on `_Base`, as a method that builds a `_Call` (the
request and how to read its answer) and is marked `@_operation`: read through a `Client`
it sends the call and returns the result, through an `AsyncClient` it returns a
coroutine. Streaming operations (exec, follows, push/pull, image builds) share their
request builders and differ only in how they read. Models are imported lazily so that the
CLI's hot paths (`exec`, `--version`) do not pay for them.

A box reference is a name, an id, a unique id prefix, or `current`: the box the CLI made
or chose last (`paddock new` / `paddock use`), read from the CLI's settings file.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
from urllib.parse import quote, urlencode

from . import _tls
from ._config import ClientConfig
from ._version import __version__
from .wire import frames as _frames
from .wire.errors import (
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    PaddockError,
    ServerError,
    error_from_body,
)

# Not `typing.TYPE_CHECKING`: importing typing (and dataclasses, pathlib) costs tens of
# milliseconds on a small VPS, on every `paddock exec`. mypy understands this spelling.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import (
        AsyncIterator,
        Awaitable,
        Callable,
        Generator,
        Iterable,
        Iterator,
        Mapping,
        Sequence,
    )
    from pathlib import Path
    from typing import Any, NoReturn

    from ._archive import Progress, PushPlan
    from ._http import ConnectionPool, Response
    from ._http_async import AsyncResponse
    from ._placement import Kind
    from .wire.models import (
        AgentInfo,
        AuditEvent,
        Box,
        BoxStats,
        BoxTypeList,
        CopyKind,
        Credential,
        CredentialUse,
        DesktopLink,
        DeviceCode,
        DeviceToken,
        Drive,
        EgressEvent,
        ExecResult,
        FileList,
        Invite,
        Member,
        MemberRemoved,
        NetworkSpec,
        NetworkSuggestion,
        NewToken,
        NewWebhook,
        Preview,
        PushResult,
        RunInfo,
        Secret,
        ServerLogLine,
        ServerStatus,
        Setting,
        Snapshot,
        SshHostKey,
        SshKey,
        Template,
        TokenInfo,
        Webhook,
        WebhookDelivery,
        WebhookTest,
    )

    # ("boxes", BoxList) | ("box", Box) | ("box-removed", {"id": ...}) |
    # ("box-event", PaddockEvent): /v1/events
    BoxEvent = tuple[str, Any]


BOX_FILE_TYPE = "application/vnd.paddock.box+zstd"


def _file_chunks(source: str | Path, progress: Progress | None) -> Iterator[bytes]:
    """A local file's bytes as a request body, read as it is sent."""
    with open(source, "rb") as f:
        while chunk := f.read(1 << 20):
            yield chunk
            if progress is not None:
                progress(len(chunk))


class _Request:
    __slots__ = ("body", "content_type", "json", "method", "params", "path", "slow", "untimed")

    def __init__(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        json: Any = None,
        body: bytes | Iterable[bytes] | None = None,
        content_type: str | None = None,
        untimed: bool = False,
        slow: bool = False,
    ) -> None:
        self.method, self.path, self.params = method, path, params
        self.json, self.body, self.content_type = json, body, content_type
        # The answer lasts as long as a command runs or a follow is wanted: no read timeout.
        self.untimed = untimed
        # The server writes or starts a box's files first (a snapshot of a large box takes
        # minutes): a read timeout of SLOW_SECONDS at least.
        self.slow = slow

    @property
    def target(self) -> str:
        # doseq: a list is the parameter repeated (`allow=a&allow=b`).
        return self.path + ("?" + urlencode(self.params, doseq=True) if self.params else "")


SLOW_SECONDS = 900.0


class _Call:
    """One operation's request and how to turn its answer (JSON, `text` or `binary`) into
    the result."""

    __slots__ = ("binary", "parse", "req", "text")

    def __init__(
        self,
        req: _Request,
        parse: Callable[[Any], Any] | None = None,
        *,
        text: bool = False,
        binary: bool = False,
    ) -> None:
        self.req, self.parse, self.text, self.binary = req, parse, text, binary

    def result(self, data: Any) -> Any:
        return self.parse(data) if self.parse else None

    def read(self, body: bytes) -> Any:
        if self.binary:
            return body
        if self.text:
            return body.decode(errors="replace")
        return self.result(json.loads(body) if body else None)


class _Stream:
    """A request whose answer is read as it arrives: `feed` turns each chunk into the
    items it completes and `end` says whether the stream ended whole. Iterated, it gives
    the items; as a step of an operation, the list of all of them."""

    __slots__ = ("feed", "req")

    def __init__(self, req: _Request, feed: _Feed) -> None:
        self.req, self.feed = req, feed


class _Sink:
    """A request whose body a blocking function consumes (a file written, an archive
    extracted): `consume(headers, chunks)` gives the step's result. `AsyncClient` runs it
    in a worker thread."""

    __slots__ = ("consume", "req")

    def __init__(
        self, req: _Request, consume: Callable[[dict[str, str], Iterator[bytes]], Any]
    ) -> None:
        self.req, self.consume = req, consume


class _Lines:
    """A feed for streams of pieces ended by `sep` (ndjson lines, server-sent events)."""

    def __init__(self, sep: bytes, parse: Callable[[bytes], list[Any]]) -> None:
        self._sep, self._parse, self._buf = sep, parse, b""

    def feed(self, chunk: bytes) -> list[Any]:
        *done, self._buf = (self._buf + chunk).split(self._sep)
        return [item for piece in done for item in self._parse(piece)]

    def end(self) -> None:
        pass  # a follow ends when the server ends it


def _model(name: str, field: str | None = None) -> Callable[[Any], Any]:
    """A parser into the wire model `name` (or that model's `field`), imported when used."""

    def parse(data: Any) -> Any:
        from .wire import models as _models

        obj = _models.from_wire(getattr(_models, name), data)
        return getattr(obj, field) if field else obj

    return parse


def _same(data: Any) -> Any:
    return data


class _operation:
    """Marks a `_Base` method that builds a `_Call` (or a generator of steps: `_Call`,
    `_Stream`, `_Sink`, each answer sent back in): a `Client` performs it, an
    `AsyncClient` returns a coroutine that does (typed below for mypy)."""

    _send = "_do"  # the client's method that performs what the builder describes

    def __init__(self, build: Callable[..., Any]) -> None:
        self._build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        build, send = self._build, getattr(obj, self._send)

        def bound(*args: Any, **kwargs: Any) -> Any:
            return send(build(obj, *args, **kwargs))

        bound.__doc__ = self.__doc__
        bound.__name__ = self.__name__
        return bound


class _streaming(_operation):
    """Marks a `_Base` method that builds a `_Stream`: a `Client` returns an iterator of
    its items, an `AsyncClient` an async one."""

    _send = "_iterate"


if TYPE_CHECKING:
    from typing import Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

    _P = ParamSpec("_P")
    _T = TypeVar("_T")

    class _TypedCall(_Call, Generic[_T]):  # what a builder promises its answer becomes
        pass

    class _TypedStream(_Stream, Generic[_T]):  # a stream of _T items
        pass

    class _Feed(Protocol):
        def feed(self, chunk: bytes) -> list[Any]: ...
        def end(self) -> object: ...

    # An operation in several steps: yields what to send, returns the result.
    Steps = Generator[Any, Any, _T]

    class _typed_operation(Generic[_P, _T]):
        def __init__(
            self, build: Callable[Concatenate[Any, _P], _TypedCall[_T] | Steps[_T]]
        ) -> None: ...

        @overload
        def __get__(self, obj: Client, owner: type | None = None) -> Callable[_P, _T]: ...

        @overload
        def __get__(
            self, obj: AsyncClient, owner: type | None = None
        ) -> Callable[_P, Awaitable[_T]]: ...

        @overload
        def __get__(self, obj: _Base, owner: type | None = None) -> Callable[_P, Any]: ...

        def __get__(self, obj: Any, owner: type | None = None) -> Any: ...

    class _typed_streaming(Generic[_P, _T]):
        def __init__(self, build: Callable[Concatenate[Any, _P], _TypedStream[_T]]) -> None: ...

        @overload
        def __get__(self, obj: Client, owner: type | None = None) -> Callable[_P, Iterator[_T]]: ...

        @overload
        def __get__(
            self, obj: AsyncClient, owner: type | None = None
        ) -> Callable[_P, AsyncIterator[_T]]: ...

        @overload
        def __get__(self, obj: _Base, owner: type | None = None) -> Callable[_P, Any]: ...

        def __get__(self, obj: Any, owner: type | None = None) -> Any: ...

    operation = _typed_operation
    streaming = _typed_streaming
    Call = _TypedCall
    Stream = _TypedStream
else:
    operation = _operation
    streaming = _streaming
    Call = _Call
    Stream = _Stream


def _template(name: str) -> str:
    if not name or "/" in name:
        raise InvalidRequest(f"invalid template name {name!r}")
    return "/v1/templates/" + quote(name, safe="")


# `defaults` keys that are lists on the wire, named in the singular there.
_PLURAL = {"drives": "drive"}


def _query(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None and v != []}


def _context_plan(folder: str | Path, dockerfile: str | Path | None) -> tuple[PushPlan, str]:
    """The build context as a tar plan (`.dockerignore` honoured), and the Dockerfile's
    path inside it (one outside the context travels beside it)."""
    from pathlib import Path

    from ._archive import plan_push

    context = Path(folder)
    if not context.is_dir():
        raise NotFound(f"no such folder: {context}")
    ignore = context / ".dockerignore"
    excludes = ignore.read_text(errors="replace").splitlines() if ignore.is_file() else []
    items = [(str(context), "")]
    given = Path(dockerfile) if dockerfile is not None else context / "Dockerfile"
    try:
        inside = given.resolve().relative_to(context.resolve()).as_posix()
    except ValueError:
        if not given.is_file():
            raise NotFound(f"no such Dockerfile: {given}") from None
        inside = ".paddock-dockerfile"
        items.append((str(given), inside))
    return plan_push(items, excludes), inside


def _attached(method: str, box: str, kind: str, name: str = "") -> Call[list[str]]:
    """Keys ("auth") or secrets attached to a box: listed, or one attached or detached."""
    path = _box(box) + f"/{kind}" + (f"/{quote(name, safe='')}" if name else "")
    model, field = ("BoxAuth", "providers") if kind == "auth" else ("BoxSecrets", "secrets")
    return Call(_Request(method, path), _model(model, field))


def _uses(path: str, params: dict[str, Any]) -> Call[list[CredentialUse]]:
    given = {k: str(v) for k, v in params.items() if v is not None}
    return Call(_Request("GET", path, params=given), _model("CredentialUseList", "uses"))


def _setting(key: str) -> str:
    return "/v1/settings/" + quote(key, safe="")


def _box(ref: str) -> str:
    if not ref or "/" in ref:
        raise InvalidRequest(f"invalid box reference {ref!r}")
    if ref == "current":
        ref = current_box()
    return "/v1/boxes/" + quote(ref, safe="")


def current_box() -> str:
    """The box `current` stands for: $PADDOCK_BOX where it is set (one shell's or agent's
    own), else the one made or chosen last with the CLI on this machine."""
    current = os.environ.get("PADDOCK_BOX") or ClientConfig.load().current
    if not current:
        raise InvalidRequest(
            "there is no current box: create one with `paddock new`, pick one with "
            "`paddock use BOX`, or set PADDOCK_BOX"
        )
    return current


def _argv(cmd: str | Sequence[str]) -> list[str]:
    # A string is a shell command line, as a person would type it; a list is exact argv.
    return ["/bin/bash", "-lc", cmd] if isinstance(cmd, str) else list(cmd)


def _exec_body(
    cmd: str | Sequence[str],
    env: dict[str, str] | None,
    workdir: str | None,
    user: str | None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"cmd": _argv(cmd), "env": env or {}, **extra}
    if workdir:
        body["workdir"] = workdir
    if user:
        body["user"] = user
    return body


def _result(exit_code: int, out: dict[str, list[bytes]]) -> ExecResult:
    from .wire.models import ExecResult

    return ExecResult(
        exit_code=exit_code,
        stdout=b"".join(out["stdout"]).decode(errors="replace"),
        stderr=b"".join(out["stderr"]).decode(errors="replace"),
    )


class ExecEvent(tuple[str, bytes]):
    """("stdout" | "stderr", data) as the command produces it."""


class _ExecReader:
    """The exec stream's frames, read the one way every client reads them (HTTP or
    WebSocket, sync or async): output as `ExecEvent`s, the exit code kept, an error raised."""

    def __init__(self) -> None:
        self._decoder = _frames.FrameDecoder()
        self.exit_code: int | None = None

    def feed(self, chunk: bytes) -> list[ExecEvent]:
        events = []
        for kind, payload in self._decoder.feed(chunk):
            if kind == _frames.STDOUT:
                events.append(ExecEvent(("stdout", payload)))
            elif kind == _frames.STDERR:
                events.append(ExecEvent(("stderr", payload)))
            elif kind == _frames.EXIT:
                self.exit_code = int(json.loads(payload)["exit_code"])
            elif kind == _frames.ERROR:
                raise error_from_body(500, json.loads(payload))
        return events

    def end(self) -> int:
        if self.exit_code is None:
            raise ConnectionFailed("the exec stream ended before the command's exit code arrived")
        return self.exit_code


def _ndjson(parse: Callable[[Any], Any] = _same) -> _Lines:
    """A feed for newline-delimited JSON: each object parsed; an `error` object raised."""

    def line(raw: bytes) -> list[Any]:
        if not raw.strip():
            return []
        event = json.loads(raw)
        if "error" in event:
            raise error_from_body(500, event)
        return [parse(event)]

    return _Lines(b"\n", line)


def _box_event(raw: bytes) -> list[BoxEvent]:
    """A server-sent event of /v1/events as (kind, data); comments are skipped.
    paddockd's events are one `event:` and one `data:` line each (JSON has no newline)."""
    kind, data = "message", None
    for line in raw.decode().splitlines():
        field, _, value = line.partition(":")
        if field == "event":
            kind = value.strip()
        elif field == "data":
            data = json.loads(value)
    if data is None:
        return []
    parsers = {
        "boxes": _model("BoxList"),
        "box": _model("Box"),
        "box-event": _model("PaddockEvent"),
    }
    parse = parsers.get(kind, _same)
    return [(kind, parse(data))]


def _started(data: Any) -> tuple[int, str]:
    """(pid, log file) from the answer to a background start (an ExecResult)."""
    out, err = str(data.get("stdout", "")), str(data.get("stderr", ""))
    code = data.get("exit_code")
    if code != 0:
        said = err.strip() or f"the command did not start (exit code {code})"
        raise InvalidRequest(said, code="not_started", details={"exit_code": code})
    pid, _, log = out.strip().partition(" ")
    if not pid.isdigit() or not log:
        raise ServerError(f"the box said {out[:200]!r} for a command it started")
    return int(pid), log


class _Base:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        if url is None or token is None:
            cfg = ClientConfig.load()
            url = url or cfg.url
            token = token if token is not None else cfg.token
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _perform(self, call: _Call) -> Any:
        raise NotImplementedError

    def _read_timeout(self, req: _Request) -> float:
        return max(self.timeout, SLOW_SECONDS) if req.slow else self.timeout

    def _headers(self, req: _Request) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"paddock-python/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if req.content_type:
            headers["Content-Type"] = req.content_type
        elif req.json is not None:
            headers["Content-Type"] = "application/json"
        return headers

    @staticmethod
    def _payload(req: _Request) -> bytes | Iterable[bytes] | None:
        return json.dumps(req.json).encode() if req.json is not None else req.body

    def _error(self, status: int, body: bytes, path: str) -> PaddockError:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode(errors="replace")
        return error_from_body(status, parsed, server=self.url, path=path)

    def _answer(self, call: _Call, body: bytes) -> Any:
        """The call's result; an answer Paddock would not give means the URL is not one."""
        try:
            return call.read(body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ServerError(
                f"{self.url} does not look like a Paddock server "
                f"(unexpected answer for {call.req.path})"
            ) from exc

    # -- server -----------------------------------------------------------------------
    @operation
    def health(self) -> Call[dict[str, Any]]:
        """The server's liveness and version (needs no token)."""
        return Call(_Request("GET", "/v1/health"), _same)

    @operation
    def device_code(self, client: str = "paddock CLI") -> Call[DeviceCode]:
        """Start a device login (needs no token): show `user_code` and
        `verification_uri` to a person, then poll `device_token`."""
        body = {"client": client}
        return Call(_Request("POST", "/v1/device/code", json=body), _model("DeviceCode"))

    @operation
    def device_token(self, device_code: str) -> Call[DeviceToken]:
        """A device login's state: pending, approved (with the token, once), denied or
        expired."""
        body = {"device_code": device_code}
        return Call(_Request("POST", "/v1/device/token", json=body), _model("DeviceToken"))

    @operation
    def status(self) -> Call[ServerStatus]:
        """Engine, image, capacity, boxes and anything that needs the admin's eye."""
        return Call(_Request("GET", "/v1/status"), _model("ServerStatus"))

    @operation
    def box_types(self) -> Call[BoxTypeList]:
        return Call(_Request("GET", "/v1/types"), _model("BoxTypeList"))

    @operation
    def list_agents(self) -> Call[list[AgentInfo]]:
        """The coding agents in the box image, their versions, and whether a key is set."""
        return Call(_Request("GET", "/v1/agents"), _model("AgentList", "agents"))

    # -- boxes ------------------------------------------------------------------------
    @operation
    def create_box(
        self,
        name: str | None = None,
        *,
        box_type: str | None = None,
        ttl: int | None = None,
        ttl_action: str | None = None,
        drives: Sequence[str] | None = None,
        network: str | None = None,
        allow: Sequence[str] | None = None,
        agent: str | None = None,
        idle_stop: int | None = None,
        keep: int | None = None,
        secrets: Sequence[str] | None = None,
        template: str | None = None,
    ) -> Call[Box]:
        """Create and start a box. `drives`: names (or "name:ro") mounted at /mnt/<name>,
        created if they do not exist. `network`: allow-all, deny-all or allowlist (with
        `allow`: IPv4 addresses/CIDRs, domains, *.domains). `agent`: the box's default
        agent for `prompt`. `idle_stop`: seconds without use after which it stops (0:
        never; None: the server's default). `keep`: the stop snapshots it keeps, newest
        first (None: the server's retention). `secrets`: your secrets attached to it.
        `template`: made from that template (its files; its defaults fill in the rest)."""
        body = {
            "template": template,
            "secrets": list(secrets) if secrets else None,
            "agent": agent,
            "idle_stop": idle_stop,
            "keep": keep,
            "name": name,
            "type": box_type,
            "ttl": ttl,
            "ttl_action": ttl_action,
            "drives": list(drives) if drives else None,
            "network": network,
            "allow": list(allow) if allow else None,
        }
        req = _Request(
            "POST", "/v1/boxes", json={k: v for k, v in body.items() if v is not None}, slow=True
        )
        return Call(req, _model("Box"))

    @operation
    def list_boxes(self) -> Call[list[Box]]:
        return Call(_Request("GET", "/v1/boxes"), _model("BoxList", "boxes"))

    @operation
    def get_box(self, ref: str) -> Call[Box]:
        return Call(_Request("GET", _box(ref)), _model("Box"))

    @operation
    def stop_box(self, ref: str) -> Call[Box]:
        """Stop the box; a snapshot keeps its files (not its processes)."""
        return Call(_Request("POST", _box(ref) + "/stop", slow=True), _model("Box"))

    @operation
    def resume_box(self, ref: str) -> Call[Box]:
        return Call(_Request("POST", _box(ref) + "/resume", slow=True), _model("Box"))

    @operation
    def extend_box(self, ref: str, ttl: int) -> Call[Box]:
        """Give the box `ttl` more seconds from now."""
        return Call(_Request("POST", _box(ref) + "/extend", json={"ttl": ttl}), _model("Box"))

    @operation
    def delete_box(self, ref: str, *, force: bool = False) -> Call[None]:
        """Delete the box with its snapshots (`force`: even while it runs)."""
        return Call(_Request("DELETE", _box(ref), {"force": "true"} if force else None, slow=True))

    @operation
    def box_logs(self, ref: str, *, tail: int = 0) -> Call[str]:
        """What the box's init and services wrote (its container's log), as text; the last
        `tail` lines only, unless 0."""
        params = {"tail": str(tail)} if tail else None
        return Call(_Request("GET", _box(ref) + "/logs", params), text=True)

    @operation
    def box_stats(self, ref: str) -> Call[BoxStats]:
        """What the box uses now: CPU (%, 100 = one CPU), memory, disk and processes
        against its limits; a box that is not running has its state and no figures."""
        return Call(_Request("GET", _box(ref) + "/stats"), _model("BoxStats"))

    @operation
    def stats(self) -> Call[list[BoxStats]]:
        """`box_stats` of every box, measured together (about a quarter second)."""
        return Call(_Request("GET", "/v1/stats"), _model("BoxStatsList", "boxes"))

    # -- network ----------------------------------------------------------------------
    @operation
    def get_network(self, ref: str) -> Call[NetworkSpec]:
        return Call(_Request("GET", _box(ref) + "/network"), _model("NetworkSpec"))

    @operation
    def set_network(self, ref: str, mode: str, allow: Sequence[str] = ()) -> Call[NetworkSpec]:
        """Set the box's egress policy; it applies at once. A bad one changes nothing."""
        req = _Request("PUT", _box(ref) + "/network", json={"mode": mode, "allow": list(allow)})
        return Call(req, _model("NetworkSpec"))

    @staticmethod
    def _r_network_log(ref: str, limit: int, follow: bool) -> _Request:
        params = {"limit": str(limit), **({"follow": "true"} if follow else {})}
        return _Request("GET", _box(ref) + "/network/log", params, untimed=follow)

    @streaming
    def follow_network_log(self, ref: str, *, limit: int = 0) -> Stream[EgressEvent]:
        """The log so far (the last `limit` entries), then each new entry as it happens."""
        return Stream(self._r_network_log(ref, limit, True), _ndjson(_model("EgressEvent")))

    @operation
    def network_log(self, ref: str, *, limit: int = 0) -> Call[list[EgressEvent]]:
        """The box's egress log: names looked up and destinations tried, with verdicts."""
        return Call(self._r_network_log(ref, limit, False), _model("EgressLog", "events"))

    @operation
    def suggest_network(self, ref: str) -> Call[NetworkSuggestion]:
        """An allowlist covering what the box reached, from its egress log."""
        req = _Request("GET", _box(ref) + "/network/suggest")
        return Call(req, _model("NetworkSuggestion"))

    # -- snapshots, restore, fork -------------------------------------------------------
    @operation
    def snapshot_box(self, ref: str, label: str | None = None) -> Call[Snapshot]:
        """Snapshot the box's files now (a running box pauses only while its layer is written)."""
        req = _Request("POST", _box(ref) + "/snapshots", json={"label": label}, slow=True)
        return Call(req, _model("Snapshot"))

    @operation
    def list_snapshots(self, ref: str) -> Call[list[Snapshot]]:
        req = _Request("GET", _box(ref) + "/snapshots")
        return Call(req, _model("SnapshotList", "snapshots"))

    @operation
    def delete_snapshot(self, ref: str, snapshot: str | int) -> Call[None]:
        return Call(_Request("DELETE", _box(ref) + "/snapshots/" + quote(str(snapshot), safe="")))

    @operation
    def restore_box(self, ref: str, snapshot: str | int) -> Call[Box]:
        """Rewind the box's files to a snapshot (by id or label); drives are untouched."""
        req = _Request("POST", _box(ref) + "/restore", json={"snapshot": str(snapshot)}, slow=True)
        return Call(req, _model("Box"))

    @operation
    def fork_box(
        self,
        ref: str,
        name: str | None = None,
        snapshot: str | int | None = None,
        *,
        box_type: str | None = None,
    ) -> Call[Box]:
        """A new box from this one's files, now or at a snapshot; `box_type`: the fork's box
        type (default: the source's). Refused before anything is copied when it would
        not fit; a fork that fails leaves no snapshot behind."""
        body = {
            "name": name,
            "snapshot": str(snapshot) if snapshot is not None else None,
            "type": box_type,
        }
        return Call(_Request("POST", _box(ref) + "/fork", json=body, slow=True), _model("Box"))

    @operation
    def fork_boxes(
        self,
        ref: str,
        count: int,
        name_prefix: str | None = None,
        snapshot: str | int | None = None,
        *,
        box_type: str | None = None,
    ) -> Call[list[Box]]:
        """`count` new boxes from this one's files at once, named NAME_PREFIX-1 .. -N (or
        generated names): all are made, or none (a refusal for capacity comes before
        anything is copied)."""
        body = {
            "count": count,
            "name_prefix": name_prefix,
            "snapshot": str(snapshot) if snapshot is not None else None,
            "type": box_type,
        }
        req = _Request("POST", _box(ref) + "/forks", json=body, slow=True)
        return Call(req, _model("ForkList", "boxes"))

    # -- drives -------------------------------------------------------------------------
    @operation
    def create_drive(self, name: str, *, capacity_mb: int | None = None) -> Call[Drive]:
        """A new empty drive; `capacity_mb`: the most it holds (absent: it grows within
        the server's disk)."""
        body: dict[str, Any] = {"name": name}
        if capacity_mb is not None:
            body["capacity_mb"] = capacity_mb
        return Call(_Request("POST", "/v1/drives", json=body), _model("Drive"))

    @operation
    def list_drives(self) -> Call[list[Drive]]:
        return Call(_Request("GET", "/v1/drives"), _model("DriveList", "drives"))

    @operation
    def delete_drive(self, name: str, *, owner: str | None = None) -> Call[None]:
        """Delete your drive `name`; the owner names someone else's with `owner` (their
        username, or a removed account's `owner_id` from `list_drives`)."""
        params = {"owner": owner} if owner else None
        return Call(_Request("DELETE", "/v1/drives/" + quote(name, safe=""), params))

    # -- previews -----------------------------------------------------------------------
    @operation
    def create_preview(
        self, ref: str, port: int, public: bool = False, ttl: int | None = None
    ) -> Call[Preview]:
        """A URL for the web server on `port` in the box (on its 0.0.0.0 or 127.0.0.1).
        Private unless `public`: the URL carries a secret. `ttl`: seconds until it ends
        (None: until removed). Asking again for the same port makes a new URL; the old
        one dies."""
        body: dict[str, Any] = {"port": port, "public": public}
        if ttl:
            body["ttl"] = ttl
        return Call(_Request("POST", _box(ref) + "/previews", json=body), _model("Preview"))

    @operation
    def list_previews(self, ref: str | None = None) -> Call[list[Preview]]:
        """Your previews (the owner: everyone's), or one box's."""
        path = _box(ref) + "/previews" if ref else "/v1/previews"
        return Call(_Request("GET", path), _model("PreviewList", "previews"))

    @operation
    def delete_preview(self, preview_id: str) -> Call[None]:
        """End a preview: its URL stops working at once."""
        return Call(_Request("DELETE", "/v1/previews/" + quote(preview_id, safe="")))

    # -- tokens and members ---------------------------------------------------------------
    @operation
    def list_tokens(self) -> Call[list[TokenInfo]]:
        """Your API tokens (the owner: everyone's), never the secrets."""
        return Call(_Request("GET", "/v1/tokens"), _model("TokenList", "tokens"))

    @operation
    def create_token(
        self, name: str, expires_in: int | None = None, scope: str | None = None
    ) -> Call[NewToken]:
        """A new API token of yours, valid `expires_in` seconds (None: until revoked);
        `token` is shown this once. `scope="metrics"`: one that reads /metrics and nothing
        else (the server owner's, for a Prometheus scraper)."""
        body: dict[str, Any] = {"name": name}
        if expires_in is not None:
            body["expires_in"] = expires_in
        if scope is not None:
            body["scope"] = scope
        return Call(_Request("POST", "/v1/tokens", json=body), _model("NewToken"))

    @operation
    def delete_token(self, token_id: str) -> Call[None]:
        """Revoke a token: it stops working at once."""
        return Call(_Request("DELETE", "/v1/tokens/" + quote(token_id, safe="")))

    @operation
    def invite_member(self, role: str = "member") -> Call[Invite]:
        """A one-time link (7 days) that creates an account with `role` (owner only)."""
        body = {"role": role}
        return Call(_Request("POST", "/v1/members/invites", json=body), _model("Invite"))

    @operation
    def list_members(self) -> Call[list[Member]]:
        """Everyone with an account (owner only)."""
        return Call(_Request("GET", "/v1/members"), _model("MemberList", "members"))

    @operation
    def set_member_limits(
        self,
        username: str,
        max_boxes: int | None = None,
        max_cpus: float | None = None,
        max_memory_mb: int | None = None,
    ) -> Call[Member]:
        """Replace a member's limits; each None means no limit of their own (owner only).
        Running boxes keep running: the limits apply to the next create or resume."""
        path = "/v1/members/" + quote(username, safe="") + "/limits"
        body = {"max_boxes": max_boxes, "max_cpus": max_cpus, "max_memory_mb": max_memory_mb}
        return Call(_Request("PUT", path, json=body), _model("Member"))

    @operation
    def remove_member(self, username: str) -> Call[MemberRemoved]:
        """Remove an account: its sessions end, tokens are revoked, running boxes stop; the
        boxes are kept (owner only)."""
        path = "/v1/members/" + quote(username, safe="")
        return Call(_Request("DELETE", path, slow=True), _model("MemberRemoved"))

    # -- agent runs -----------------------------------------------------------------------
    @operation
    def start_run(
        self,
        box: str,
        instruction: str,
        *,
        agent: str | None = None,
        workdir: str | None = None,
        model: str | None = None,
        json_events: bool = False,
        wake: bool = False,
    ) -> Call[RunInfo]:
        """Start a coding agent headless in the box; it goes on if this client goes away.
        `wake`: start the box first if it is stopped."""
        return self._c_start_run(box, instruction, agent, workdir, model, json_events, wake)

    @staticmethod
    def _c_start_run(
        box: str,
        instruction: str,
        agent: str | None,
        workdir: str | None,
        model: str | None,
        json_events: bool,
        wake: bool,
    ) -> Call[RunInfo]:
        body = {
            "instruction": instruction,
            "agent": agent,
            "workdir": workdir,
            "model": model,
            "json": json_events,
            "wake": wake,
        }
        return Call(_Request("POST", _box(box) + "/runs", json=body), _model("RunInfo"))

    @operation
    def list_runs(self, box: str) -> Call[list[RunInfo]]:
        return Call(_Request("GET", _box(box) + "/runs"), _model("RunList", "runs"))

    @operation
    def get_run(self, run_id: str) -> Call[RunInfo]:
        return Call(_Request("GET", "/v1/runs/" + quote(run_id, safe="")), _model("RunInfo"))

    @operation
    def stop_run(self, run_id: str) -> Call[RunInfo]:
        req = _Request("POST", "/v1/runs/" + quote(run_id, safe="") + "/stop")
        return Call(req, _model("RunInfo"))

    @streaming
    def follow_run(self, run_id: str, *, live: bool = True) -> Stream[dict[str, Any]]:
        """The run's output events so far, then (if `live`) the rest as they come:
        {"stream", "data"} ..., and last {"status", "exit_code"} once it ended."""
        return self._s_run_log(run_id, live)

    @staticmethod
    def _s_run_log(run_id: str, live: bool) -> Stream[dict[str, Any]]:
        params = {"follow": "true" if live else "false"}
        req = _Request("GET", "/v1/runs/" + quote(run_id, safe="") + "/log", params, untimed=True)
        return Stream(req, _ndjson())

    @operation
    def prompt(
        self,
        box: str,
        instruction: str,
        *,
        agent: str | None = None,
        workdir: str | None = None,
        model: str | None = None,
        wake: bool = False,
    ) -> Steps[ExecResult]:
        """Run an agent to completion: its output and exit code."""
        run = yield self._c_start_run(box, instruction, agent, workdir, model, False, wake)
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        code = -1
        for event in (yield self._s_run_log(run.id, True)):
            if "stream" in event:
                out[event["stream"]].append(str(event["data"]).encode())
            elif "status" in event and event["exit_code"] is not None:
                code = int(event["exit_code"])
        return _result(code, out)

    @streaming
    def follow_events(self) -> Stream[BoxEvent]:
        """Your boxes as they change: first ("boxes", BoxList), then ("box", Box) for each
        change, ("box-removed", {"id": ...}), and ("box-event", PaddockEvent) for what
        happened (box.started, box.stopped with its reason, snapshot.taken, ...). The
        server ends the stream after a while (15 minutes): call again to go on."""
        return Stream(_Request("GET", "/v1/events", untimed=True), _Lines(b"\n\n", _box_event))

    # -- templates ----------------------------------------------------------------------
    @operation
    def list_templates(self) -> Call[list[Template]]:
        """Your templates and the ones shared with everyone."""
        return Call(_Request("GET", "/v1/templates"), _model("TemplateList", "templates"))

    @operation
    def get_template(self, name: str) -> Call[Template]:
        return Call(_Request("GET", _template(name)), _model("Template"))

    @operation
    def build_template(
        self,
        name: str,
        context: str | Path = ".",
        *,
        dockerfile: str | Path | None = None,
        base: str | None = None,
        build_args: Mapping[str, str] | None = None,
        box_type: str | None = None,
        network: str | None = None,
        allow: Sequence[str] | None = None,
        timeout: int | None = None,
        env: Mapping[str, str] | None = None,
        start_cmd: str | None = None,
        defaults: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Call[Template]:
        """Start building a template from a Dockerfile (`CONTEXT/Dockerfile` unless given)
        in a build box of yours; the context folder is sent as a tar (a `.dockerignore`
        there is honoured). Returns at once: follow it with `follow_template_build`.
        `network`/`allow`: the build box's egress; `timeout`: seconds it may take;
        `env`, `start_cmd`, `defaults` (type, ttl, network, allow, drives, idle_stop): what
        boxes made from it get; `base`: a template of yours to build on, whatever the
        Dockerfile's FROM says."""
        from ._archive import tar_stream

        plan, inside = _context_plan(context, dockerfile)
        params: dict[str, Any] = {
            "dockerfile": inside,
            "from": base,
            "build_arg": [f"{k}={v}" for k, v in (build_args or {}).items()],
            "type": box_type,
            "network": network,
            "allow": list(allow or ()),
            "timeout": timeout,
            "env": [f"{k}={v}" for k, v in (env or {}).items()],
            "start_cmd": start_cmd,
            **{f"default_{_PLURAL.get(k, k)}": v for k, v in (defaults or {}).items()},
        }
        body = tar_stream(plan, 0, 0, progress=progress)
        req = _Request(
            "POST",
            _template(name) + "/build",
            _query(params),
            body=body,
            content_type="application/x-tar",
            slow=True,
        )
        return Call(req, _model("Template"))

    @streaming
    def follow_template_build(self, name: str, *, live: bool = True) -> Stream[dict[str, Any]]:
        """The template's last build, so far and (if `live`) as it goes: {"stream",
        "data"} events (stream: note, step, stdout, stderr), then {"status", "message"}."""
        params = {"follow": "true" if live else "false"}
        return Stream(_Request("GET", _template(name) + "/log", params, untimed=True), _ndjson())

    @operation
    def create_template(
        self,
        name: str,
        box: str,
        *,
        snapshot: str | None = None,
        env: Mapping[str, str] | None = None,
        start_cmd: str | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> Call[Template]:
        """A template of a box's files as they are now (or as `snapshot` keeps them)."""
        body = {
            "name": name,
            "box": box,
            "snapshot": snapshot,
            "env": [f"{k}={v}" for k, v in (env or {}).items()],
            "start_cmd": start_cmd,
            "defaults": dict(defaults or {}),
        }
        return Call(_Request("POST", "/v1/templates", json=body, slow=True), _model("Template"))

    @operation
    def rebuild_template(self, name: str) -> Call[Template]:
        """Build it again from its Dockerfile and context, on today's box image."""
        return Call(_Request("POST", _template(name) + "/rebuild"), _model("Template"))

    @operation
    def share_template(self, name: str, shared: bool = True) -> Call[Template]:
        """Share one of your templates with everyone on the server (the owner's), or stop."""
        req = _Request("PUT", _template(name) + "/shared", json={"shared": shared})
        return Call(req, _model("Template"))

    @operation
    def delete_template(self, name: str) -> Call[None]:
        return Call(_Request("DELETE", _template(name)))

    # -- provider credentials -----------------------------------------------------------
    @operation
    def set_credential(
        self, provider: str, key: str, *, base_url: str | None = None, mode: str | None = None
    ) -> Call[Credential]:
        """Store a provider's API key on the server (encrypted; it is never sent back).
        `mode`: "gateway" (the default: boxes get a placeholder, the server's credential
        gateway adds the key on the way out) or "env" (boxes get the key itself)."""
        body = {"key": key, "base_url": base_url, "mode": mode}
        return Call(
            _Request("PUT", "/v1/auth/" + quote(provider, safe=""), json=body), _model("Credential")
        )

    @operation
    def credential_log(
        self, provider: str | None = None, *, box: str | None = None, limit: int = 100
    ) -> Call[list[CredentialUse]]:
        """Your provider keys' uses through the credential gateway (and refusals), newest
        first."""
        return _uses("/v1/auth/log", {"provider": provider, "box": box, "limit": limit})

    # -- secrets bound to hosts ---------------------------------------------------------
    @operation
    def set_secret(
        self,
        name: str,
        hosts: Sequence[str],
        value: str | None = None,
        *,
        header: str | None = None,
        format: str | None = None,  # noqa: A002 - the API's own word for it
    ) -> Call[Secret]:
        """Store a secret bound to `hosts` (encrypted; never sent back). A box it is attached
        to holds a placeholder in `$name`; HTTPS requests to those hosts carrying it get the
        value in its place. `value` None keeps the stored one (to change the hosts)."""
        body = {"value": value, "hosts": list(hosts), "header": header, "format": format}
        req = _Request("PUT", "/v1/secrets/" + quote(name, safe=""), json=body)
        return Call(req, _model("Secret"))

    @operation
    def list_secrets(self) -> Call[list[Secret]]:
        return Call(_Request("GET", "/v1/secrets"), _model("SecretList", "secrets"))

    @operation
    def delete_secret(self, name: str) -> Call[None]:
        return Call(_Request("DELETE", "/v1/secrets/" + quote(name, safe="")))

    @operation
    def box_secrets(self, box: str) -> Call[list[str]]:
        """The secrets attached to the box."""
        return _attached("GET", box, "secrets")

    @operation
    def attach_secret(self, box: str, name: str) -> Call[list[str]]:
        """The box gets a placeholder for your secret in `$name`; returns what is attached."""
        return _attached("PUT", box, "secrets", name)

    @operation
    def detach_secret(self, box: str, name: str) -> Call[list[str]]:
        return _attached("DELETE", box, "secrets", name)

    @operation
    def secret_log(
        self, name: str | None = None, *, box: str | None = None, limit: int = 100
    ) -> Call[list[CredentialUse]]:
        """Your secrets' uses through the credential gateway (and refusals), newest first."""
        return _uses("/v1/secrets/log", {"name": name, "box": box, "limit": limit})

    # -- audit ----------------------------------------------------------------------------
    @operation
    def audit(
        self,
        user: str | None = None,
        box: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
    ) -> Call[list[AuditEvent]]:
        """Calls that changed something or were refused, newest first: the owner sees
        everyone's (`user`: one username's, or `anonymous`), a member their own. `box`:
        calls that named it (as they named it); `since`/`until`: ISO 8601 times."""
        query = _query({"user": user, "box": box, "since": since, "until": until, "limit": limit})
        return Call(_Request("GET", "/v1/audit", query), _model("AuditLog", "events"))

    @operation
    def server_log(self, lines: int = 100) -> Call[list[ServerLogLine]]:
        """paddockd's last log messages, oldest first (the server owner's; secrets are
        masked in them as in its log file)."""
        return Call(
            _Request("GET", "/v1/log", _query({"lines": lines})), _model("ServerLog", "lines")
        )

    # -- settings -------------------------------------------------------------------------
    @operation
    def settings(self) -> Call[list[Setting]]:
        """The server's settings, with where each value comes from (the server owner's)."""
        return Call(_Request("GET", "/v1/settings"), _model("SettingList", "settings"))

    @operation
    def get_setting(self, key: str) -> Call[Setting]:
        return Call(_Request("GET", _setting(key)), _model("Setting"))

    @operation
    def set_setting(self, key: str, value: Any) -> Call[Setting]:
        """Change a setting while the server runs (kept over paddockd.toml's value until
        reset). `value`: JSON, or text as on a command line ("2h", "small=2")."""
        return Call(_Request("PUT", _setting(key), json={"value": value}), _model("Setting"))

    @operation
    def reset_setting(self, key: str) -> Call[Setting]:
        """Back to paddockd.toml's value (or the default)."""
        return Call(_Request("DELETE", _setting(key)), _model("Setting"))

    # -- webhooks -------------------------------------------------------------------------
    @operation
    def add_webhook(self, url: str, events: list[str] | None = None) -> Call[NewWebhook]:
        """POST your box events, signed, to `url` (the server owner's: every box's). `events`:
        which types (None: all). The result holds the signing secret, shown this once."""
        body = {"url": url, "events": list(events or [])}
        return Call(_Request("POST", "/v1/webhooks", json=body), _model("NewWebhook"))

    @operation
    def list_webhooks(self) -> Call[list[Webhook]]:
        return Call(_Request("GET", "/v1/webhooks"), _model("WebhookList", "webhooks"))

    @operation
    def delete_webhook(self, webhook_id: str) -> Call[None]:
        return Call(_Request("DELETE", "/v1/webhooks/" + quote(webhook_id, safe="")))

    @operation
    def test_webhook(self, webhook_id: str) -> Call[WebhookTest]:
        """Send a `webhook.test` event at once (tried once): what the receiver answered."""
        path = "/v1/webhooks/" + quote(webhook_id, safe="") + "/test"
        return Call(_Request("POST", path), _model("WebhookTest"))

    @operation
    def webhook_deliveries(self, webhook_id: str, limit: int = 50) -> Call[list[WebhookDelivery]]:
        """The webhook's last deliveries, newest first."""
        path = "/v1/webhooks/" + quote(webhook_id, safe="") + "/deliveries"
        return Call(
            _Request("GET", path, _query({"limit": limit})),
            _model("WebhookDeliveries", "deliveries"),
        )

    # -- ssh ------------------------------------------------------------------------------
    @operation
    def list_ssh_keys(self) -> Call[list[SshKey]]:
        return Call(_Request("GET", "/v1/ssh-keys"), _model("SshKeyList", "keys"))

    @operation
    def add_ssh_key(self, name: str, public_key: str) -> Call[SshKey]:
        """Register an OpenSSH public key (one line, as in `id_ed25519.pub`) that may log
        in to your boxes over `paddock ssh`."""
        req = _Request(
            "PUT", "/v1/ssh-keys/" + quote(name, safe=""), json={"public_key": public_key}
        )
        return Call(req, _model("SshKey"))

    @operation
    def delete_ssh_key(self, name: str) -> Call[None]:
        return Call(_Request("DELETE", "/v1/ssh-keys/" + quote(name, safe="")))

    @operation
    def box_ssh_host_key(self, box: str) -> Call[SshHostKey]:
        """The box's SSH host key, for a pinned known_hosts line."""
        return Call(_Request("GET", _box(box) + "/ssh"), _model("SshHostKey"))

    @operation
    def list_credentials(self) -> Call[list[Credential]]:
        return Call(_Request("GET", "/v1/auth"), _model("CredentialList", "providers"))

    @operation
    def delete_credential(self, provider: str) -> Call[None]:
        return Call(_Request("DELETE", "/v1/auth/" + quote(provider, safe="")))

    @operation
    def box_credentials(self, box: str) -> Call[list[str]]:
        """The providers whose keys the box's commands get."""
        return _attached("GET", box, "auth")

    @operation
    def attach_credential(self, box: str, provider: str) -> Call[list[str]]:
        """The box's commands get this provider's key from now on; returns what is attached."""
        return _attached("PUT", box, "auth", provider)

    @operation
    def detach_credential(self, box: str, provider: str) -> Call[list[str]]:
        return _attached("DELETE", box, "auth", provider)

    # -- desktop ----------------------------------------------------------------------
    @operation
    def desktop_link(
        self, ref: str, *, view_only: bool = False, size: str | None = None
    ) -> Call[DesktopLink]:
        """A browser link to the box's desktop (short-lived, for this box only)."""
        body = {"view_only": view_only, "size": size}
        return Call(_Request("POST", _box(ref) + "/desktop", json=body), _model("DesktopLink"))

    @staticmethod
    def _desktop_input(ref: str, action: str, **fields: Any) -> Call[None]:
        body = {"action": action, **{k: v for k, v in fields.items() if v is not None}}
        return Call(_Request("POST", _box(ref) + "/desktop/input", json=body))

    @operation
    def desktop_click(self, ref: str, x: int, y: int, *, button: int = 1) -> Call[None]:
        """Click at (x, y), pixels from the top left of the desktop."""
        return self._desktop_input(ref, "click", x=x, y=y, button=button)

    @operation
    def desktop_type(self, ref: str, text: str) -> Call[None]:
        return self._desktop_input(ref, "type", text=text)

    @operation
    def desktop_key(self, ref: str, keys: str) -> Call[None]:
        """A key or combination in xdotool's names: "Return", "ctrl+s", "alt+F4"."""
        return self._desktop_input(ref, "key", keys=keys)

    @operation
    def exec_desktop(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        wait: bool = False,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> Call[ExecResult]:
        """Start a graphical program on the box's desktop (started first if need be).
        Returns once it started; with `wait=True`, once it ended, with its output."""
        body = _exec_body(cmd, env, workdir, None, desktop=True, detach=not wait)
        req = _Request("POST", _box(box) + "/exec", {"wait": "true"}, json=body, untimed=wait)
        return Call(req, _model("ExecResult"))

    @operation
    def start(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        wake: bool = False,
    ) -> Call[tuple[int, str]]:
        """Start a command in the background (a session of its own, no stdin) and return at
        once: its pid and the file in the box its output goes to. A command that cannot
        start raises InvalidRequest (code "not_started", `details["exit_code"]` 127 for
        no such program, 126 for a working directory that is not one)."""
        extra = {"detach": True, **({"wake": True} if wake else {})}
        body = _exec_body(cmd, env, workdir, user, **extra)
        req = _Request("POST", _box(box) + "/exec", {"wait": "true"}, json=body)
        return Call(req, _started)

    @operation
    def screenshot(self, ref: str, *, size: str | None = None) -> Call[bytes]:
        """A PNG of the box's desktop; `size` ("1280x800") resizes the desktop first."""
        req = _Request("GET", _box(ref) + "/desktop/screenshot", {"size": size} if size else None)
        return Call(req, binary=True)

    # -- exec and files ------------------------------------------------------------------
    @staticmethod
    def _s_exec(
        box: str,
        cmd: str | Sequence[str],
        env: dict[str, str] | None,
        workdir: str | None,
        user: str | None,
        wake: bool,
    ) -> tuple[_Stream, _ExecReader]:
        """The exec stream, and its feed: it keeps the exit code."""
        body = _exec_body(cmd, env, workdir, user, **({"wake": True} if wake else {}))
        req = _Request("POST", _box(box) + "/exec", json=body, untimed=True)
        reader = _ExecReader()
        return _Stream(req, reader), reader

    @operation
    def exec(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        wake: bool = False,
    ) -> Steps[ExecResult]:
        """Run a command to completion and return its output and exit code. A string runs
        in `bash -lc`. `wake`: start the box first if it is stopped."""
        stream, reader = self._s_exec(box, cmd, env, workdir, user, wake)
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        for kind, data in (yield stream):
            out[kind].append(data)
        return _result(reader.end(), out)

    @operation
    def push(
        self,
        box: str,
        sources: Sequence[str | Path],
        dest: str,
        *,
        exclude: Sequence[str] = (),
        owner: tuple[int, int] = (1000, 1000),
        progress: Progress | None = None,
        wake: bool = False,
    ) -> Steps[PushResult]:
        """Copy local files or folders into the box, by docker cp's rules: into `dest`
        when it is a folder there (`SRC/.`: SRC's contents), else as `dest` (a folder
        `SRC` is created there with its contents; `dest`'s folder must exist). Several
        sources go into the folder `dest`. Files in the way are replaced. A
        `.paddockignore` (gitignore syntax) in a folder is honoured. Everything pushed,
        and any folder made for it, is `owner`'s. `wake`: start the box first if stopped.
        """
        from ._archive import tar_stream

        kind, name, plan = self._push_plan(sources, exclude)
        # The tar is written from local files as it is sent (by a worker thread in async);
        # the box places it by the same rules, where it sees what DEST is (no look first).
        body = tar_stream(plan, *owner, progress=progress)
        params = {"path": dest, "kind": kind, "name": name, "owner": f"{owner[0]}:{owner[1]}"}
        if wake:
            params["wake"] = "true"
        req = _Request(
            "PUT", _box(box) + "/files/copy", params, body=body, content_type="application/x-tar"
        )
        result: PushResult = yield Call(req, _model("PushResult"))
        return result

    @operation
    def pull(
        self,
        box: str,
        src: str,
        dest: str | Path,
        *,
        force: bool = False,
        exclude: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> Steps[Path]:
        """Copy `src` out of the box to `dest` by the rules of `push` (`src/.`: its
        contents). Never writes outside `dest` nor through a link; links are kept as links.
        Written aside and moved into place when whole: a failed pull leaves `dest` as it
        was. Refuses to overwrite unless `force`. `exclude`: gitignore patterns, matched
        below `src`. Returns the path `src` became (or, for contents, the folder they went
        into)."""
        from ._archive import extract_stream

        def extract(headers: dict[str, str], chunks: Iterator[bytes]) -> Path:
            root, target, merge = self._pull_target(src, dest, headers)
            extract_stream(
                chunks,
                root,
                target,
                force=force,
                merge=merge,
                exclude=exclude,
                progress=progress,
            )
            return target

        req = _Request("GET", _box(box) + "/files", {"path": src}, untimed=True)
        became: Path = yield _Sink(req, extract)
        return became

    @operation
    def download(
        self, box: str, src: str, dest: str | Path, *, archive: str = "zip", force: bool = False
    ) -> Steps[Path]:
        """Save `src` from the box as the one local file `dest`, as the dashboard downloads
        it: a file as it is, a folder as a zip (or `archive="tar"`) holding only what stays
        inside it (links leading out, devices and fifos are left out). Replaces an
        existing `dest` only with `force`."""
        if archive not in ("zip", "tar"):
            raise InvalidRequest(f"archive is zip or tar, not {archive!r}")
        params = {"path": src, "format": archive}
        req = _Request("GET", _box(box) + "/files/download", params, untimed=True)
        saved: Path = yield _Sink(req, self._saver(dest, force))
        return saved

    @operation
    def export_box(
        self,
        box: str,
        dest: str | Path,
        *,
        snapshot: str | int | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> Steps[Path]:
        """Write the box's files and settings (or those of its `snapshot`) to the one file
        `dest`, which `import_box` makes a box of, here or on another server. A running box
        keeps running (its disk is copied under a freeze of milliseconds). Replaces an
        existing `dest` only with `force`. `progress(n)` is told of each n bytes written."""
        params = {"snapshot": str(snapshot)} if snapshot is not None else None
        req = _Request("GET", _box(box) + "/export", params, untimed=True)
        saved: Path = yield _Sink(req, self._saver(dest, force, progress))
        return saved

    @operation
    def import_box(
        self,
        source: str | Path,
        *,
        name: str | None = None,
        box_type: str | None = None,
        rebase: bool = False,
        progress: Progress | None = None,
    ) -> Call[Box]:
        """Make a new box of a box file from `export_box`, and start it: named `name`, of
        type `box_type` (default: the exported box's). `rebase`: lay its files over this
        server's box image when the one they were made over is not here. A damaged or
        cut file is refused (`bad_archive`) and leaves nothing. `progress(n)` is told of
        each n bytes sent."""
        params = {"name": name, "type": box_type, "rebase": "true" if rebase else None}
        query = {k: v for k, v in params.items() if v is not None}
        if not os.path.isfile(source):
            raise InvalidRequest(f"{source}: no such file")
        body = _file_chunks(source, progress)
        req = _Request(
            "POST", "/v1/imports", query, body=body, content_type=BOX_FILE_TYPE, slow=True
        )
        return Call(req, _model("Box"))

    def _saver(
        self, dest: str | Path, force: bool, progress: Progress | None = None
    ) -> Callable[[dict[str, str], Iterator[bytes]], Path]:
        """A sink's consumer that writes the answer to `dest` whole or not at all."""
        import os

        target, partial = self._download_target(dest, force)

        def save(headers: dict[str, str], chunks: Iterator[bytes]) -> Path:
            try:
                with open(partial, "wb") as f:
                    for chunk in chunks:
                        f.write(chunk)
                        if progress is not None:
                            progress(len(chunk))
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            return target

        return save

    @operation
    def stat(self, box: str, path: str) -> Call[dict[str, Any]]:
        """What is at `path` in the box: {"exists", "type", "size", "mode", "uid", "gid"}
        (the box's own ids; "target" for a link)."""
        return Call(_Request("GET", _box(box) + "/files/stat", {"path": path}), _same)

    @operation
    def list_files(self, box: str, path: str = "/config") -> Call[FileList]:
        """The entries of the folder `path` in the box, by name, as the box user reads
        them (at most 5000: `truncated` says when there were more)."""
        req = _Request("GET", _box(box) + "/files/list", {"path": path})
        return Call(req, _model("FileList"))

    @staticmethod
    def _download_target(dest: str | Path, force: bool) -> tuple[Path, Path]:
        """The file a download becomes, and the partial file it is written to first (in
        the same folder, so the last step is a rename: never half a file at `dest`)."""
        import os
        from pathlib import Path

        target = Path(dest)
        if target.is_dir():
            raise InvalidRequest(f"{target} is a folder: give the file to write")
        if (target.exists() or target.is_symlink()) and not force:
            from .wire.errors import Conflict

            raise Conflict(f"{target} exists (force=True replaces it)")
        return target, target.with_name(f".{target.name}.{os.getpid()}.part")

    @staticmethod
    def _push_plan(
        sources: Sequence[str | Path], exclude: Sequence[str]
    ) -> tuple[CopyKind, str, PushPlan]:
        """How the box is to place a push (`kind`, and the name on top of the tar for one
        SRC sent whole), and the tar it sends: one SRC whole is its name on top; several,
        or a folder's contents, go into DEST as a folder."""
        from ._archive import plan_push
        from ._placement import check_source, local_source

        srcs = [check_source(local_source(str(s))) for s in sources]
        if len(srcs) == 1 and not srcs[0].contents:
            (src,) = srcs
            return src.kind, src.name, plan_push([(src.path, src.name)], list(exclude))
        items = [(src.path, "" if src.contents else src.name) for src in srcs]
        return "into", "", plan_push(items, list(exclude))

    @staticmethod
    def push_size(sources: Sequence[str | Path], exclude: Sequence[str] = ()) -> int:
        """How many bytes a push of these sources sends (for progress bars)."""
        from ._archive import plan_push

        return plan_push([(str(s), "") for s in sources], list(exclude)).total_bytes

    @staticmethod
    def _pull_target(src: str, dest: str | Path, headers: Any) -> tuple[str, Path, bool]:
        """Where a pull writes: the archive's top name, the path it becomes, and whether
        that is an existing folder SRC's contents merge into. `headers` are the pull
        answer's: X-Paddock-Stat says what SRC is."""
        import base64
        import os
        from pathlib import Path

        from ._placement import Source, land, local_dest

        header = headers.get("x-paddock-stat")
        described = json.loads(base64.b64decode(header)) if header else {}
        name = posixpath.basename(described.get("path") or posixpath.normpath(src)) or "/"
        kind: Kind = "dir" if described.get("type") == "dir" else "file"
        landing = land(Source(src, name, kind, local=False), local_dest(str(dest)))
        # Merging writes into the folder itself: by its real path, so that a link the
        # user named as DEST is followed, never replaced.
        target = os.path.realpath(landing.path) if landing.merge else landing.path
        return name, Path(target), landing.merge

    @streaming
    def build_image(
        self, *, no_cache: bool = False, rebuild_base: bool = False, upgrade_agents: bool = False
    ) -> Stream[dict[str, Any]]:
        """Build the box image on the server; yields progress events as they happen.
        `upgrade_agents` moves the coding agents to their latest versions first."""
        body = {
            "no_cache": no_cache,
            "rebuild_base": rebuild_base,
            "upgrade_agents": upgrade_agents,
        }
        return Stream(_Request("POST", "/v1/images/build", json=body, untimed=True), _ndjson())


class ExecStream:
    """Iterate to get `ExecEvent`s as they happen; `exit_code` is set at the end."""

    def __init__(self, events: Iterator[ExecEvent], reader: _ExecReader) -> None:
        self._events, self._reader = events, reader

    @property
    def exit_code(self) -> int | None:
        return self._reader.exit_code

    def __iter__(self) -> Iterator[ExecEvent]:
        return self._events


class AsyncExecStream:
    """`async for` it to get `ExecEvent`s as they happen; `exit_code` is set at the end
    (the request is sent when iteration starts)."""

    def __init__(self, events: AsyncIterator[ExecEvent], reader: _ExecReader) -> None:
        self._events, self._reader = events, reader

    @property
    def exit_code(self) -> int | None:
        return self._reader.exit_code

    def __aiter__(self) -> AsyncIterator[ExecEvent]:
        return self._events


def _pool(url: str, timeout: float) -> ConnectionPool:
    from ._http import ConnectionPool

    return ConnectionPool(url, connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout)


class Client(_Base):
    """Blocking client. Reads the URL and token from the CLI's config file (or
    PADDOCK_URL / PADDOCK_TOKEN) when they are not given. Safe to share between threads."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        super().__init__(url, token, timeout)
        self._conn = _pool(self.url, timeout)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the transport: every operation of `_Base` is performed by these --------------------
    def _open(self, req: _Request) -> Response:
        resp = self._conn.request(
            req.method,
            req.target,
            self._headers(req),
            self._payload(req),
            read_timeout=None if req.untimed else self._read_timeout(req),
        )
        if resp.status >= 400:
            raise self._error(resp.status, resp.read(), req.path)
        return resp

    def _do(self, built: _Call | Generator[Any, Any, Any]) -> Any:
        """Perform an operation: one call, or a generator of steps sent one by one."""
        if isinstance(built, _Call):
            return self._step(built)
        try:
            step = next(built)
            while True:
                step = built.send(self._step(step))
        except StopIteration as done:
            return done.value

    def _step(self, step: _Call | _Stream | _Sink) -> Any:
        if isinstance(step, _Stream):
            return list(self._iterate(step))
        with self._open(step.req) as resp:
            if isinstance(step, _Sink):
                return step.consume(resp.headers, resp.iter_bytes())
            return self._answer(step, resp.read())

    def _iterate(self, stream: _Stream) -> Iterator[Any]:
        # The request goes out now, so that its errors raise here, not at the first item.
        return self._items(self._open(stream.req), stream.feed)

    @staticmethod
    def _items(resp: Response, feed: _Feed) -> Iterator[Any]:
        with resp:  # an iteration stopped early closes the connection
            for chunk in resp.iter_bytes():
                yield from feed.feed(chunk)
        feed.end()

    # -- exec ----------------------------------------------------------------------------
    def exec_stream(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        wake: bool = False,
    ) -> ExecStream:
        """Run a command and stream its output; `.exit_code` after. A string runs in
        `bash -lc`. `wake`: start the box first if it is stopped."""
        stream, reader = self._s_exec(box, cmd, env, workdir, user, wake)
        return ExecStream(self._iterate(stream), reader)

    def exec_session(self, box: str, cmd: str | Sequence[str], **options: Any) -> ExecSession:
        """An interactive exec over a WebSocket (stdin, TTY, resize)."""
        return ExecSession(self, box, cmd, **options)


class ExecSession:
    """Bidirectional exec over a WebSocket: stdin in, framed stdout/stderr/exit out."""

    def __init__(self, client: Client, box: str, cmd: str | Sequence[str], **options: Any) -> None:
        from websockets.sync.client import connect

        ws_url, sock = _session_socket(client, box)
        try:
            # Entered by hand: the session outlives this call and `close()` ends it.
            self._ws = connect(ws_url, sock=sock, **_session_options(client, ws_url)).__enter__()
        except Exception as exc:
            _session_refused(client, box, sock, exc)
        from websockets.exceptions import ConnectionClosed

        # A session refused at once (a bad token, no such box) is closed by then: why is
        # the error frame it sent, raised when the output is read.
        with contextlib.suppress(ConnectionClosed):
            self._ws.send(json.dumps(_session_body(cmd, options)))
        self._reader = _ExecReader()

    @property
    def exit_code(self) -> int | None:
        return self._reader.exit_code

    def send(self, data: bytes) -> None:
        self._ws.send(data)

    def close_stdin(self) -> None:
        self._ws.send(json.dumps({"type": "eof"}))

    def resize(self, cols: int, rows: int) -> None:
        self._ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def __iter__(self) -> Iterator[ExecEvent]:
        from websockets.exceptions import ConnectionClosed

        try:
            for message in self._ws:
                if isinstance(message, bytes):
                    yield from self._reader.feed(message)
        except ConnectionClosed:
            pass

    def close(self) -> None:
        self._ws.close()


class AsyncExecSession:
    """`ExecSession` for asyncio: `send`, `close_stdin`, `resize`, `async for` the output,
    `exit_code` at the end, `close`."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._reader = _ExecReader()

    @classmethod
    async def open(
        cls, client: AsyncClient, box: str, cmd: str | Sequence[str], **options: Any
    ) -> AsyncExecSession:
        from websockets.asyncio.client import connect

        ws_url, sock = await client._conn.run(lambda: _session_socket(client, box))
        try:
            ws = await connect(ws_url, sock=sock, **_session_options(client, ws_url))
        except Exception as exc:
            _session_refused(client, box, sock, exc)
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):  # refused at once: see ExecSession
            await ws.send(json.dumps(_session_body(cmd, options)))
        return cls(ws)

    @property
    def exit_code(self) -> int | None:
        return self._reader.exit_code

    async def send(self, data: bytes) -> None:
        await self._ws.send(data)

    async def close_stdin(self) -> None:
        await self._ws.send(json.dumps({"type": "eof"}))

    async def resize(self, cols: int, rows: int) -> None:
        await self._ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def __aiter__(self) -> AsyncIterator[ExecEvent]:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in self._ws:
                if isinstance(message, bytes):
                    for event in self._reader.feed(message):
                        yield event
        except ConnectionClosed:
            pass

    async def close(self) -> None:
        await self._ws.close()


def _session_socket(client: Client | AsyncClient, box: str) -> tuple[str, socket.socket]:
    """The exec WebSocket's URL and a socket to it, opened as the HTTP client opens its
    own: the same proxy decision (websockets would apply urllib's NO_PROXY rules) and the
    same errors."""
    ws_url = client.url.replace("http", "ws", 1) + _box(box) + "/exec/ws"
    pool = client._conn if isinstance(client, Client) else client._conn.pool
    sock = pool.open_socket()
    # Left at the connect timeout, every quiet moment of a session longer than that
    # would end it; websockets applies `open_timeout` to the handshake by itself.
    sock.settimeout(None)
    return ws_url, sock


def _session_options(client: _Base, ws_url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    return {
        "additional_headers": headers,
        "max_size": None,
        "open_timeout": client.timeout,
        "ssl": _tls.context() if ws_url.startswith("wss:") else None,
    }


def _session_refused(client: _Base, box: str, sock: socket.socket, exc: Exception) -> NoReturn:
    """A failed handshake: the socket closed, the SDK's error for it raised."""
    sock.close()
    if isinstance(exc, OSError):
        raise ConnectionFailed(f"cannot open a session at {client.url}: {exc}") from exc
    response = getattr(exc, "response", None)  # websockets' InvalidStatus: the error body
    if response is None:
        raise exc
    answer = bytes(response.body or b"")
    raise client._error(response.status_code, answer, _box(box) + "/exec/ws") from exc


def _session_body(cmd: str | Sequence[str], options: dict[str, Any]) -> dict[str, Any]:
    return _exec_body(
        cmd,
        options.get("env"),
        options.get("workdir"),
        options.get("user"),
        tty=bool(options.get("tty")),
        stdin=True,
        cols=options.get("cols"),
        rows=options.get("rows"),
        # wake: resume a stopped box first; ssh: an SSH session instead of `cmd`.
        **{flag: True for flag in ("wake", "ssh") if options.get(flag)},
    )


class AsyncClient(_Base):
    """Asyncio client with the same operations as `Client`, over the same HTTP stack (its
    blocking steps run in worker threads: `_http_async`)."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        super().__init__(url, token, timeout)
        from ._http_async import AsyncPool

        self._conn = AsyncPool(_pool(self.url, timeout))

    async def aclose(self) -> None:
        self._conn.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the transport: `Client`'s, awaited ----------------------------------------------
    async def _open(self, req: _Request) -> AsyncResponse:
        resp = await self._conn.request(
            req.method,
            req.target,
            self._headers(req),
            self._payload(req),
            read_timeout=None if req.untimed else self._read_timeout(req),
        )
        if resp.status >= 400:
            try:
                body = await resp.aread()
            finally:
                await resp.aclose()
            raise self._error(resp.status, body, req.path)
        return resp

    async def _do(self, built: _Call | Generator[Any, Any, Any]) -> Any:
        if isinstance(built, _Call):
            return await self._step(built)
        try:
            step = next(built)
            while True:
                step = built.send(await self._step(step))
        except StopIteration as done:
            return done.value

    async def _step(self, step: _Call | _Stream | _Sink) -> Any:
        if isinstance(step, _Stream):
            return [item async for item in self._iterate(step)]
        resp = await self._open(step.req)
        try:
            if isinstance(step, _Sink):
                return await resp.consume(step.consume)
            return self._answer(step, await resp.aread())
        finally:
            await resp.aclose()

    async def _iterate(self, stream: _Stream) -> AsyncIterator[Any]:
        resp = await self._open(stream.req)
        try:
            async for chunk in resp.aiter_bytes():
                for item in stream.feed.feed(chunk):
                    yield item
        finally:
            await resp.aclose()
        stream.feed.end()

    # -- exec ----------------------------------------------------------------------------
    def exec_stream(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        wake: bool = False,
    ) -> AsyncExecStream:
        """Run a command and stream its output (`async for`); `.exit_code` after. A string
        runs in `bash -lc`. `wake`: start the box first if it is stopped."""
        stream, reader = self._s_exec(box, cmd, env, workdir, user, wake)
        return AsyncExecStream(self._iterate(stream), reader)

    async def exec_session(
        self, box: str, cmd: str | Sequence[str], **options: Any
    ) -> AsyncExecSession:
        """An interactive exec over a WebSocket (stdin, TTY, resize), as `Client.exec_session`."""
        return await AsyncExecSession.open(self, box, cmd, **options)
