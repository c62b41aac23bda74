"""`Client` (blocking) and `AsyncClient` over one request-building base.

`_Base` turns each operation into a `_Request` and each answer into a model or a
`PaddockError`; the two clients only send. Models are imported lazily so that the CLI's
hot paths (`exec`, `--version`) do not pay for pydantic.
"""

from __future__ import annotations

import json
import posixpath
from urllib.parse import quote, urlencode

from . import _frames
from ._config import ClientConfig
from ._exceptions import ConnectionFailed, InvalidRequest, PaddockError, error_from_body
from ._version import __version__

# Not `typing.TYPE_CHECKING`: importing typing (and dataclasses, pathlib) costs tens of
# milliseconds on a small VPS, on every `paddock exec`. mypy understands this spelling.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
    from pathlib import Path
    from typing import Any

    import httpx

    from ._archive import Progress
    from ._models import (
        AgentInfo,
        Box,
        BoxTypeList,
        Credential,
        DesktopLink,
        Drive,
        EgressEvent,
        ExecResult,
        NetworkSpec,
        NetworkSuggestion,
        PushResult,
        RunInfo,
        ServerStatus,
        Snapshot,
    )


class _Request:
    __slots__ = ("body", "content_type", "json", "method", "params", "path")

    def __init__(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        json: Any = None,
        body: bytes | Iterable[bytes] | None = None,
        content_type: str | None = None,
    ) -> None:
        self.method, self.path, self.params = method, path, params
        self.json, self.body, self.content_type = json, body, content_type

    @property
    def target(self) -> str:
        return self.path + ("?" + urlencode(self.params) if self.params else "")


def _box(ref: str) -> str:
    if not ref or "/" in ref:
        raise InvalidRequest(f"invalid box reference {ref!r}")
    return "/v1/boxes/" + quote(ref, safe="")


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
    from ._models import ExecResult

    return ExecResult(
        exit_code=exit_code,
        stdout=b"".join(out["stdout"]).decode(errors="replace"),
        stderr=b"".join(out["stderr"]).decode(errors="replace"),
    )


class ExecEvent(tuple[str, bytes]):
    """("stdout" | "stderr", data) as the command produces it."""


class _Base:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        if url is None or token is None:
            cfg = ClientConfig.load()
            url = url or cfg.url
            token = token if token is not None else cfg.token
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

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

    @staticmethod
    def _error(status: int, body: bytes) -> PaddockError:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode(errors="replace")
        return error_from_body(status, parsed)

    # -- requests -------------------------------------------------------------------
    @staticmethod
    def _r_desktop_link(ref: str, view_only: bool, size: str | None) -> _Request:
        body = {"view_only": view_only, "size": size}
        return _Request("POST", _box(ref) + "/desktop", json=body)

    @staticmethod
    def _r_screenshot(ref: str, size: str | None) -> _Request:
        return _Request("GET", _box(ref) + "/desktop/screenshot", {"size": size} if size else None)

    @staticmethod
    def _r_desktop_input(ref: str, action: str, **fields: Any) -> _Request:
        body = {"action": action, **{k: v for k, v in fields.items() if v is not None}}
        return _Request("POST", _box(ref) + "/desktop/input", json=body)

    @staticmethod
    def _r_exec_desktop(
        box: str,
        cmd: str | Sequence[str],
        env: dict[str, str] | None,
        workdir: str | None,
        wait: bool,
    ) -> _Request:
        body = _exec_body(cmd, env, workdir, None, desktop=True, detach=not wait)
        return _Request("POST", _box(box) + "/exec", {"wait": "true"}, json=body)

    @staticmethod
    def _r_network_log(ref: str, limit: int, follow: bool) -> _Request:
        params = {"limit": str(limit), **({"follow": "true"} if follow else {})}
        return _Request("GET", _box(ref) + "/network/log", params)

    @staticmethod
    def _r_create(
        name: str | None,
        box_type: str | None,
        ttl: int | None,
        ttl_action: str | None,
        drives: Sequence[str] | None = None,
        network: str | None = None,
        allow: Sequence[str] | None = None,
        agent: str | None = None,
    ) -> _Request:
        body = {
            "agent": agent,
            "name": name,
            "type": box_type,
            "ttl": ttl,
            "ttl_action": ttl_action,
            "drives": list(drives) if drives else None,
            "network": network,
            "allow": list(allow) if allow else None,
        }
        return _Request("POST", "/v1/boxes", json={k: v for k, v in body.items() if v is not None})

    @staticmethod
    def _r_snapshot(ref: str, label: str | None) -> _Request:
        return _Request("POST", _box(ref) + "/snapshots", json={"label": label})

    @staticmethod
    def _r_snapshots(ref: str) -> _Request:
        return _Request("GET", _box(ref) + "/snapshots")

    @staticmethod
    def _r_delete_snapshot(ref: str, snap: str | int) -> _Request:
        return _Request("DELETE", _box(ref) + "/snapshots/" + quote(str(snap), safe=""))

    @staticmethod
    def _r_restore(ref: str, snap: str | int) -> _Request:
        return _Request("POST", _box(ref) + "/restore", json={"snapshot": str(snap)})

    @staticmethod
    def _r_fork(ref: str, name: str | None, snap: str | int | None) -> _Request:
        body = {"name": name, "snapshot": str(snap) if snap is not None else None}
        return _Request("POST", _box(ref) + "/fork", json=body)

    @staticmethod
    def _r_drive(method: str, name: str | None = None) -> _Request:
        if name is None:
            return _Request(method, "/v1/drives")
        if method == "POST":
            return _Request(method, "/v1/drives", json={"name": name})
        return _Request(method, "/v1/drives/" + quote(name, safe=""))

    @staticmethod
    def _r_exec(ref: str, body: dict[str, Any]) -> _Request:
        return _Request("POST", _box(ref) + "/exec", json=body)

    @staticmethod
    def _r_push(ref: str, dest: str, body: Iterable[bytes]) -> _Request:
        return _Request(
            "PUT", _box(ref) + "/files", {"path": dest}, body=body, content_type="application/x-tar"
        )

    @staticmethod
    def _r_pull(ref: str, src: str) -> _Request:
        return _Request("GET", _box(ref) + "/files", {"path": src})

    @staticmethod
    def _r_stat(ref: str, path: str) -> _Request:
        return _Request("GET", _box(ref) + "/files/stat", {"path": path})


class ExecStream:
    """Iterate to get `ExecEvent`s as they happen; `exit_code` is set at the end."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.exit_code: int | None = None

    def __iter__(self) -> Iterator[ExecEvent]:
        decoder = _frames.FrameDecoder()
        for chunk in self._chunks:
            for kind, payload in decoder.feed(chunk):
                if kind == _frames.STDOUT:
                    yield ExecEvent(("stdout", payload))
                elif kind == _frames.STDERR:
                    yield ExecEvent(("stderr", payload))
                elif kind == _frames.EXIT:
                    self.exit_code = int(json.loads(payload)["exit_code"])
                elif kind == _frames.ERROR:
                    raise error_from_body(500, json.loads(payload))
        if self.exit_code is None:
            raise ConnectionFailed("the exec stream ended before the command's exit code arrived")


class Client(_Base):
    """Blocking client. Reads the URL and token from the CLI's config file (or
    PADDOCK_URL / PADDOCK_TOKEN) when they are not given."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        super().__init__(url, token, timeout)
        from ._http import ConnectionPool

        self._conn = ConnectionPool(
            self.url, connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout
        )

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, req: _Request, *, untimed: bool = False) -> Any:
        # untimed: the answer lasts as long as a command runs or a --follow is wanted, so no
        # read timeout (connect and write timeouts still apply).
        resp = self._conn.request(
            req.method,
            req.target,
            self._headers(req),
            self._payload(req),
            read_timeout=None if untimed else self.timeout,
        )
        if resp.status >= 400:
            raise self._error(resp.status, resp.read())
        return resp

    def _call(self, req: _Request, *, untimed: bool = False) -> Any:
        data = self._open(req, untimed=untimed).read()
        return json.loads(data) if data else None

    # -- boxes ------------------------------------------------------------------------
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
    ) -> Box:
        """Create and start a box. `drives`: names (or "name:ro") mounted at /mnt/<name>,
        created if they do not exist. `network`: allow-all, deny-all or allowlist (with
        `allow`: IPv4 addresses/CIDRs, domains, *.domains). `agent`: the box's default
        agent for `prompt`."""
        from ._models import Box, from_wire

        req = self._r_create(name, box_type, ttl, ttl_action, drives, network, allow, agent)
        return from_wire(Box, self._call(req))

    def get_network(self, ref: str) -> NetworkSpec:
        from ._models import NetworkSpec, from_wire

        return from_wire(NetworkSpec, self._call(_Request("GET", _box(ref) + "/network")))

    def set_network(self, ref: str, mode: str, allow: Sequence[str] = ()) -> NetworkSpec:
        """Set the box's egress policy; it applies at once. A bad one changes nothing."""
        from ._models import NetworkSpec, from_wire

        req = _Request("PUT", _box(ref) + "/network", json={"mode": mode, "allow": list(allow)})
        return from_wire(NetworkSpec, self._call(req))

    def network_log(self, ref: str, *, limit: int = 0) -> list[EgressEvent]:
        """The box's egress log: names looked up and destinations tried, with verdicts."""
        from ._models import EgressLog, from_wire

        return from_wire(EgressLog, self._call(self._r_network_log(ref, limit, False))).events

    def follow_network_log(self, ref: str, *, limit: int = 0) -> Iterator[EgressEvent]:
        """The log so far (the last `limit` entries), then each new entry as it happens."""
        from ._models import EgressEvent, from_wire

        resp = self._open(self._r_network_log(ref, limit, True), untimed=True)
        for event in _ndjson(resp.iter_bytes()):
            yield from_wire(EgressEvent, event)

    def suggest_network(self, ref: str) -> NetworkSuggestion:
        """An allowlist covering what the box reached, from its egress log."""
        from ._models import NetworkSuggestion, from_wire

        req = _Request("GET", _box(ref) + "/network/suggest")
        return from_wire(NetworkSuggestion, self._call(req))

    # -- agent runs -----------------------------------------------------------------------
    def start_run(
        self,
        box: str,
        instruction: str,
        *,
        agent: str | None = None,
        workdir: str | None = None,
        model: str | None = None,
        json_events: bool = False,
    ) -> RunInfo:
        """Start a coding agent headless in the box; it goes on if this client goes away."""
        from ._models import RunInfo, from_wire

        body = {
            "instruction": instruction,
            "agent": agent,
            "workdir": workdir,
            "model": model,
            "json": json_events,
        }
        return from_wire(RunInfo, self._call(_Request("POST", _box(box) + "/runs", json=body)))

    def list_runs(self, box: str) -> list[RunInfo]:
        from ._models import RunList, from_wire

        return from_wire(RunList, self._call(_Request("GET", _box(box) + "/runs"))).runs

    def get_run(self, run_id: str) -> RunInfo:
        from ._models import RunInfo, from_wire

        return from_wire(RunInfo, self._call(_Request("GET", f"/v1/runs/{run_id}")))

    def follow_run(self, run_id: str, *, live: bool = True) -> Iterator[dict[str, Any]]:
        """The run's output events so far, then (if `live`) the rest as they come:
        {"stream", "data"} ..., and last {"status", "exit_code"} once it ended."""
        params = {"follow": "true" if live else "false"}
        req = _Request("GET", f"/v1/runs/{run_id}/log", params)
        yield from _ndjson(self._open(req, untimed=True).iter_bytes())

    def stop_run(self, run_id: str) -> RunInfo:
        from ._models import RunInfo, from_wire

        return from_wire(RunInfo, self._call(_Request("POST", f"/v1/runs/{run_id}/stop")))

    def prompt(
        self,
        box: str,
        instruction: str,
        *,
        agent: str | None = None,
        workdir: str | None = None,
        model: str | None = None,
    ) -> ExecResult:
        """Run an agent to completion: its output and exit code."""
        run = self.start_run(box, instruction, agent=agent, workdir=workdir, model=model)
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        code = -1
        for event in self.follow_run(run.id):
            if "stream" in event:
                out[event["stream"]].append(str(event["data"]).encode())
            elif "status" in event:
                code = int(event["exit_code"]) if event["exit_code"] is not None else -1
        return _result(code, out)

    def list_agents(self) -> list[AgentInfo]:
        """The coding agents in the box image, their versions, and whether a key is set."""
        from ._models import AgentList, from_wire

        return from_wire(AgentList, self._call(_Request("GET", "/v1/agents"))).agents

    # -- provider credentials -----------------------------------------------------------
    def set_credential(self, provider: str, key: str, *, base_url: str | None = None) -> Credential:
        """Store a provider's API key on the server (encrypted; it is never sent back)."""
        from ._models import Credential, from_wire

        body = {"key": key, "base_url": base_url}
        return from_wire(Credential, self._call(_Request("PUT", f"/v1/auth/{provider}", json=body)))

    def list_credentials(self) -> list[Credential]:
        from ._models import CredentialList, from_wire

        return from_wire(CredentialList, self._call(_Request("GET", "/v1/auth"))).providers

    def delete_credential(self, provider: str) -> None:
        self._call(_Request("DELETE", f"/v1/auth/{provider}"))

    def attach_credential(self, box: str, provider: str) -> list[str]:
        """The box's commands get this provider's key from now on; returns what is attached."""
        from ._models import BoxAuth, from_wire

        req = _Request("PUT", _box(box) + f"/auth/{provider}")
        return from_wire(BoxAuth, self._call(req)).providers

    def detach_credential(self, box: str, provider: str) -> list[str]:
        from ._models import BoxAuth, from_wire

        req = _Request("DELETE", _box(box) + f"/auth/{provider}")
        return from_wire(BoxAuth, self._call(req)).providers

    def list_boxes(self) -> list[Box]:
        from ._models import BoxList, from_wire

        return from_wire(BoxList, self._call(_Request("GET", "/v1/boxes"))).boxes

    def get_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, self._call(_Request("GET", _box(ref))))

    def stop_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, self._call(_Request("POST", _box(ref) + "/stop")))

    def resume_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, self._call(_Request("POST", _box(ref) + "/resume")))

    def extend_box(self, ref: str, ttl: int) -> Box:
        from ._models import Box, from_wire

        return from_wire(
            Box, self._call(_Request("POST", _box(ref) + "/extend", json={"ttl": ttl}))
        )

    def delete_box(self, ref: str, *, force: bool = False) -> None:
        self._call(_Request("DELETE", _box(ref), {"force": "true"} if force else None))

    def box_types(self) -> BoxTypeList:
        from ._models import BoxTypeList, from_wire

        return from_wire(BoxTypeList, self._call(_Request("GET", "/v1/types")))

    def status(self) -> ServerStatus:
        from ._models import ServerStatus, from_wire

        return from_wire(ServerStatus, self._call(_Request("GET", "/v1/status")))

    # -- snapshots, restore, fork -------------------------------------------------------
    def snapshot_box(self, ref: str, label: str | None = None) -> Snapshot:
        """Snapshot the box's files now (a running box pauses only while its layer is written)."""
        from ._models import Snapshot, from_wire

        return from_wire(Snapshot, self._call(self._r_snapshot(ref, label)))

    def list_snapshots(self, ref: str) -> list[Snapshot]:
        from ._models import SnapshotList, from_wire

        return from_wire(SnapshotList, self._call(self._r_snapshots(ref))).snapshots

    def delete_snapshot(self, ref: str, snapshot: str | int) -> None:
        self._call(self._r_delete_snapshot(ref, snapshot))

    def restore_box(self, ref: str, snapshot: str | int) -> Box:
        """Rewind the box's files to a snapshot (by id or label); drives are untouched."""
        from ._models import Box, from_wire

        return from_wire(Box, self._call(self._r_restore(ref, snapshot)))

    def fork_box(self, ref: str, name: str | None = None, snapshot: str | int | None = None) -> Box:
        """A new box from this one's files, now or at a snapshot."""
        from ._models import Box, from_wire

        return from_wire(Box, self._call(self._r_fork(ref, name, snapshot)))

    # -- drives -------------------------------------------------------------------------
    def create_drive(self, name: str) -> Drive:
        from ._models import Drive, from_wire

        return from_wire(Drive, self._call(self._r_drive("POST", name)))

    def list_drives(self) -> list[Drive]:
        from ._models import DriveList, from_wire

        return from_wire(DriveList, self._call(self._r_drive("GET"))).drives

    def delete_drive(self, name: str) -> None:
        self._call(self._r_drive("DELETE", name))

    # -- exec -------------------------------------------------------------------------
    def exec_stream(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> ExecStream:
        """Run a command and stream its output. A string runs in `bash -lc`."""
        resp = self._open(self._r_exec(box, _exec_body(cmd, env, workdir, user)), untimed=True)
        return ExecStream(resp.iter_bytes())

    def exec(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run a command to completion and return its output and exit code."""

        stream = self.exec_stream(box, cmd, env=env, workdir=workdir, user=user)
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        for kind, data in stream:
            out[kind].append(data)
        assert stream.exit_code is not None
        return _result(stream.exit_code, out)

    def exec_desktop(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        wait: bool = False,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> ExecResult:
        """Start a graphical program on the box's desktop (started first if need be).
        Returns once it started; with `wait=True`, once it ended, with its output."""
        from ._models import ExecResult, from_wire

        req = self._r_exec_desktop(box, cmd, env, workdir, wait)
        return from_wire(ExecResult, self._call(req, untimed=wait))

    # -- desktop ----------------------------------------------------------------------
    def desktop_link(
        self, ref: str, *, view_only: bool = False, size: str | None = None
    ) -> DesktopLink:
        """A browser link to the box's desktop (short-lived, for this box only)."""
        from ._models import DesktopLink, from_wire

        return from_wire(DesktopLink, self._call(self._r_desktop_link(ref, view_only, size)))

    def screenshot(self, ref: str, *, size: str | None = None) -> bytes:
        """A PNG of the box's desktop; `size` ("1280x800") resizes the desktop first."""
        data: bytes = self._open(self._r_screenshot(ref, size)).read()
        return data

    def desktop_click(self, ref: str, x: int, y: int, *, button: int = 1) -> None:
        self._call(self._r_desktop_input(ref, "click", x=x, y=y, button=button))

    def desktop_type(self, ref: str, text: str) -> None:
        self._call(self._r_desktop_input(ref, "type", text=text))

    def desktop_key(self, ref: str, keys: str) -> None:
        """A key or combination in xdotool's names: "Return", "ctrl+s", "alt+F4"."""
        self._call(self._r_desktop_input(ref, "key", keys=keys))

    def exec_session(self, box: str, cmd: str | Sequence[str], **options: Any) -> ExecSession:
        """An interactive exec over a WebSocket (stdin, TTY, resize)."""
        return ExecSession(self, box, cmd, **options)

    # -- files ------------------------------------------------------------------------
    def stat(self, box: str, path: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self._r_stat(box, path))
        return result

    def push(
        self,
        box: str,
        sources: Sequence[str | Path],
        dest: str,
        *,
        exclude: Sequence[str] = (),
        owner: tuple[int, int] = (1000, 1000),
        progress: Progress | None = None,
    ) -> PushResult:
        """Copy local files or folders into the box.

        One folder: its contents land in `dest`. One file: it becomes `dest`, or lands
        inside `dest` when that is a directory in the box. Several sources: each lands in
        `dest/<name>`. A `.paddockignore` (gitignore syntax) in a folder is honoured.
        """
        from pathlib import Path

        from ._archive import plan_push, tar_stream
        from ._models import PushResult, from_wire

        paths = [Path(s) for s in sources]
        single_file = len(paths) == 1 and paths[0].exists() and not paths[0].is_dir()
        target, into_dir = dest, len(paths) > 1
        if single_file:
            st = self.stat(box, dest)
            if not (st["exists"] and st["type"] == "dir") and not dest.endswith("/"):
                target, into_dir = posixpath.dirname(dest.rstrip("/")) or "/", True
                plan = plan_push(paths, list(exclude), into_dir=True)
                plan.entries[0] = type(plan.entries[0])(
                    plan.entries[0].local, posixpath.basename(dest.rstrip("/")), plan.entries[0].st
                )
            else:
                plan = plan_push(paths, list(exclude), into_dir=True)
        else:
            plan = plan_push(paths, list(exclude), into_dir=into_dir)
        body = tar_stream(plan, *owner, progress=progress)
        data = self._call(self._r_push(box, target, body))
        return from_wire(PushResult, data)

    def push_size(self, sources: Sequence[str | Path], exclude: Sequence[str] = ()) -> int:
        from pathlib import Path

        from ._archive import plan_push

        return plan_push([Path(s) for s in sources], list(exclude), into_dir=True).total_bytes

    def pull(
        self,
        box: str,
        src: str,
        dest: str | Path,
        *,
        force: bool = False,
        progress: Progress | None = None,
    ) -> Path:
        """Copy `src` out of the box to `dest` (into it, when `dest` is a directory).
        Never writes outside `dest`; refuses to overwrite unless `force`."""
        from pathlib import Path

        from ._archive import extract_stream, pull_target

        root = posixpath.basename(posixpath.normpath(src)) or "/"
        target = pull_target(Path(dest), root)
        if (target.exists() or target.is_symlink()) and not force:
            from ._exceptions import Conflict

            raise Conflict(f"{target} already exists; use --force to overwrite")
        resp = self._open(self._r_pull(box, src))
        try:
            extract_stream(resp.iter_bytes(), root, target, force=force, progress=progress)
        finally:
            resp.close()
        return target

    # -- images -----------------------------------------------------------------------
    def build_image(
        self, *, no_cache: bool = False, rebuild_base: bool = False, upgrade_agents: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Build the box image on the server; yields progress events as they happen.
        `upgrade_agents` moves the coding agents to their latest versions first."""
        body = {
            "no_cache": no_cache,
            "rebuild_base": rebuild_base,
            "upgrade_agents": upgrade_agents,
        }
        req = _Request("POST", "/v1/images/build", json=body)
        yield from _ndjson(self._open(req, untimed=True).iter_bytes())


def _ndjson(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """Objects of a newline-delimited JSON stream; an `error` object is raised."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                event: dict[str, Any] = json.loads(line)
                if "error" in event:
                    raise error_from_body(500, event)
                yield event


class ExecSession:
    """Bidirectional exec over a WebSocket: stdin in, framed stdout/stderr/exit out."""

    def __init__(self, client: _Base, box: str, cmd: str | Sequence[str], **options: Any) -> None:
        from websockets.sync.client import connect

        ws_url = client.url.replace("http", "ws", 1) + _box(box) + "/exec/ws"
        headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
        try:
            self._ws = connect(
                ws_url, additional_headers=headers, max_size=None, open_timeout=client.timeout
            )
        except OSError as exc:
            raise ConnectionFailed(f"cannot open a session at {ws_url}: {exc}") from exc
        except Exception as exc:  # websockets' InvalidStatus carries the HTTP error body
            response = getattr(exc, "response", None)
            if response is not None:
                raise client._error(response.status_code, bytes(response.body or b"")) from exc
            raise
        body = _exec_body(
            cmd,
            options.get("env"),
            options.get("workdir"),
            options.get("user"),
            tty=bool(options.get("tty")),
            stdin=True,
            cols=options.get("cols"),
            rows=options.get("rows"),
        )
        self._ws.send(json.dumps(body))
        self.exit_code: int | None = None

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
                if isinstance(message, str):
                    continue
                for kind, payload in _frames.FrameDecoder().feed(message):
                    if kind in (_frames.STDOUT, _frames.STDERR):
                        yield ExecEvent(("stdout" if kind == _frames.STDOUT else "stderr", payload))
                    elif kind == _frames.EXIT:
                        self.exit_code = int(json.loads(payload)["exit_code"])
                    elif kind == _frames.ERROR:
                        raise error_from_body(500, json.loads(payload))
        except ConnectionClosed:
            pass

    def close(self) -> None:
        self._ws.close()


class AsyncClient(_Base):
    """Asyncio client with the same operations as `Client` (httpx underneath)."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        super().__init__(url, token, timeout)
        import httpx

        self._http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(timeout, read=None))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _build(self, req: _Request) -> httpx.Request:
        return self._http.build_request(
            req.method,
            req.path,
            params=req.params,
            headers=self._headers(req),
            content=self._payload(req),
        )

    async def _send(self, req: _Request) -> httpx.Response:
        import httpx

        try:
            resp = await self._http.send(self._build(req), stream=True)
        except httpx.ConnectError as exc:
            raise ConnectionFailed(f"cannot reach the Paddock server at {self.url}: {exc}") from exc
        if resp.status_code >= 400:
            body = await resp.aread()
            raise self._error(resp.status_code, body)
        return resp

    async def _call(self, req: _Request) -> Any:
        resp = await self._send(req)
        data = await resp.aread()
        return json.loads(data) if data else None

    async def create_box(
        self,
        name: str | None = None,
        *,
        box_type: str | None = None,
        ttl: int | None = None,
        ttl_action: str | None = None,
    ) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(self._r_create(name, box_type, ttl, ttl_action)))

    async def get_network(self, ref: str) -> NetworkSpec:
        from ._models import NetworkSpec, from_wire

        return from_wire(NetworkSpec, await self._call(_Request("GET", _box(ref) + "/network")))

    async def set_network(self, ref: str, mode: str, allow: Sequence[str] = ()) -> NetworkSpec:
        from ._models import NetworkSpec, from_wire

        req = _Request("PUT", _box(ref) + "/network", json={"mode": mode, "allow": list(allow)})
        return from_wire(NetworkSpec, await self._call(req))

    async def network_log(self, ref: str, *, limit: int = 0) -> list[EgressEvent]:
        from ._models import EgressLog, from_wire

        data = await self._call(self._r_network_log(ref, limit, False))
        return from_wire(EgressLog, data).events

    async def suggest_network(self, ref: str) -> NetworkSuggestion:
        from ._models import NetworkSuggestion, from_wire

        req = _Request("GET", _box(ref) + "/network/suggest")
        return from_wire(NetworkSuggestion, await self._call(req))

    async def screenshot(self, ref: str, *, size: str | None = None) -> bytes:
        resp = await self._send(self._r_screenshot(ref, size))
        return await resp.aread()

    async def desktop_link(
        self, ref: str, *, view_only: bool = False, size: str | None = None
    ) -> DesktopLink:
        from ._models import DesktopLink, from_wire

        data = await self._call(self._r_desktop_link(ref, view_only, size))
        return from_wire(DesktopLink, data)

    async def desktop_click(self, ref: str, x: int, y: int, *, button: int = 1) -> None:
        await self._call(self._r_desktop_input(ref, "click", x=x, y=y, button=button))

    async def desktop_type(self, ref: str, text: str) -> None:
        await self._call(self._r_desktop_input(ref, "type", text=text))

    async def desktop_key(self, ref: str, keys: str) -> None:
        await self._call(self._r_desktop_input(ref, "key", keys=keys))

    async def exec_desktop(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        wait: bool = False,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> ExecResult:
        from ._models import ExecResult, from_wire

        req = self._r_exec_desktop(box, cmd, env, workdir, wait)
        return from_wire(ExecResult, await self._call(req))

    async def list_boxes(self) -> list[Box]:
        from ._models import BoxList, from_wire

        return from_wire(BoxList, await self._call(_Request("GET", "/v1/boxes"))).boxes

    async def get_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(_Request("GET", _box(ref))))

    async def stop_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(_Request("POST", _box(ref) + "/stop")))

    async def resume_box(self, ref: str) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(_Request("POST", _box(ref) + "/resume")))

    async def delete_box(self, ref: str, *, force: bool = False) -> None:
        await self._call(_Request("DELETE", _box(ref), {"force": "true"} if force else None))

    async def snapshot_box(self, ref: str, label: str | None = None) -> Snapshot:
        from ._models import Snapshot, from_wire

        return from_wire(Snapshot, await self._call(self._r_snapshot(ref, label)))

    async def list_snapshots(self, ref: str) -> list[Snapshot]:
        from ._models import SnapshotList, from_wire

        return from_wire(SnapshotList, await self._call(self._r_snapshots(ref))).snapshots

    async def delete_snapshot(self, ref: str, snapshot: str | int) -> None:
        await self._call(self._r_delete_snapshot(ref, snapshot))

    async def restore_box(self, ref: str, snapshot: str | int) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(self._r_restore(ref, snapshot)))

    async def fork_box(
        self, ref: str, name: str | None = None, snapshot: str | int | None = None
    ) -> Box:
        from ._models import Box, from_wire

        return from_wire(Box, await self._call(self._r_fork(ref, name, snapshot)))

    async def list_drives(self) -> list[Drive]:
        from ._models import DriveList, from_wire

        return from_wire(DriveList, await self._call(self._r_drive("GET"))).drives

    async def exec_stream(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> AsyncIterator[ExecEvent | int]:
        """Yields `ExecEvent`s, then the exit code (an int) last."""
        resp = await self._send(self._r_exec(box, _exec_body(cmd, env, workdir, user)))
        decoder = _frames.FrameDecoder()
        async for chunk in resp.aiter_bytes():
            for kind, payload in decoder.feed(chunk):
                if kind in (_frames.STDOUT, _frames.STDERR):
                    yield ExecEvent(("stdout" if kind == _frames.STDOUT else "stderr", payload))
                elif kind == _frames.EXIT:
                    yield int(json.loads(payload)["exit_code"])
                elif kind == _frames.ERROR:
                    raise error_from_body(500, json.loads(payload))

    async def exec(
        self,
        box: str,
        cmd: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> ExecResult:

        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        code = -1
        async for event in self.exec_stream(box, cmd, env=env, workdir=workdir, user=user):
            if isinstance(event, int):
                code = event
            else:
                out[event[0]].append(event[1])
        return _result(code, out)
