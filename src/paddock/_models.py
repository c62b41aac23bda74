"""Wire models: the contract between paddockd and every client (SDK, CLI, dashboard)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BoxStateName = Literal[
    "creating", "starting", "running", "stopping", "stopped", "deleting", "error"
]
TtlAction = Literal["stop", "delete"]
RuntimeProfile = Literal["sysbox", "userns", "plain"]


class _Wire(BaseModel):
    # A newer server may add fields; an older client must keep working.
    model_config = ConfigDict(extra="ignore")


class BoxType(_Wire):
    name: str
    cpus: float
    memory_mb: int
    pids: int
    description: str = ""


class BoxTypeList(_Wire):
    types: list[BoxType]
    default: str


class BoxCreate(_Wire):
    name: str | None = Field(None, description="DNS-label style, 1-40 chars; generated if absent")
    type: str | None = Field(None, description="Box type; the server default if absent")
    ttl: int | None = Field(None, description="Seconds the box may run; 0 means no limit")
    ttl_action: TtlAction | None = Field(None, description="What happens when the TTL runs out")


class Box(_Wire):
    id: str
    name: str
    state: BoxStateName
    desired_state: Literal["running", "stopped", "deleted"]
    type: str
    image: str
    created_at: datetime
    started_at: datetime | None = None
    expires_at: datetime | None = None
    ttl: int
    ttl_action: TtlAction
    snapshots: int = 0
    profile: RuntimeProfile
    message: str | None = Field(None, description="Why the box is in `error`, or what was repaired")


class BoxList(_Wire):
    boxes: list[Box]


class ExtendRequest(_Wire):
    ttl: int = Field(description="New time to live in seconds, counted from now")


class ExecRequest(_Wire):
    cmd: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    tty: bool = False
    stdin: bool = False
    cols: int | None = None
    rows: int | None = None


class ExecResult(_Wire):
    exit_code: int
    stdout: str
    stderr: str


class PushResult(_Wire):
    path: str
    bytes: int


class EngineStatus(_Wire):
    reachable: bool
    version: str | None = None
    profile: RuntimeProfile | None = None
    image: str
    image_present: bool = False
    error: str | None = None


class Capacity(_Wire):
    cpus_total: float
    cpus_used: float
    memory_total_mb: int
    memory_used_mb: int


class ServerStatus(_Wire):
    version: str
    engine: EngineStatus
    capacity: Capacity
    boxes_running: int
    boxes_stopped: int


class ImageBuildRequest(_Wire):
    no_cache: bool = False
    rebuild_base: bool = False


class ErrorDetail(_Wire):
    code: str
    message: str
    details: object | None = None


class ErrorBody(_Wire):
    error: ErrorDetail
