"""Wire models: the contract between paddockd and every client (SDK, CLI, dashboard).

Plain dataclasses rather than pydantic models: importing pydantic costs ~250 ms on a small
VPS, on every CLI command. paddockd still validates every request and derives the OpenAPI
schema from these same classes (FastAPI and pydantic read dataclasses natively);
`from_wire` is the client's light parser for answers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

BoxStateName = Literal[
    "creating", "starting", "running", "stopping", "stopped", "deleting", "error"
]
DesiredStateName = Literal["running", "stopped", "deleted"]
TtlAction = Literal["stop", "delete"]
RuntimeProfile = Literal["sysbox", "userns", "plain"]
NetworkMode = Literal["allow-all", "deny-all", "allowlist"]
EgressKind = Literal["dns", "connect"]
Verdict = Literal["allowed", "refused"]
DesktopActionName = Literal["click", "type", "key"]
RunStatus = Literal["running", "succeeded", "failed", "stopped", "lost"]
SnapshotKind = Literal["stop", "live", "fork"]
KeyMode = Literal["gateway", "env"]
TemplateStatus = Literal["building", "ready", "failed"]
CredentialKind = Literal["provider", "secret"]
UseOutcome = Literal["used", "refused"]


@dataclass
class BoxType:
    name: str
    cpus: float
    memory_mb: int
    pids: int
    description: str = ""
    disk_mb: int = 0  # the box's disk, where the server enforces sizes (paddock status)


@dataclass
class BoxTypeList:
    types: list[BoxType]
    default: str


@dataclass
class BoxCreate:
    """`name`: 1-40 of a-z, 0-9, '-', generated if absent. `type`: the server default if
    absent. `ttl`: seconds the box may run (0: no limit). `ttl_action`: stop or delete."""

    name: str | None = None
    type: str | None = None
    ttl: int | None = None
    ttl_action: TtlAction | None = None
    drives: list[str] = field(default_factory=list)  # "name" or "name:ro" -> /mnt/name
    network: str | None = None  # allow-all | deny-all | allowlist; server default if absent
    allow: list[str] = field(default_factory=list)  # IPv4 addresses/CIDRs; implies allowlist
    agent: str | None = None  # default agent of `paddock prompt` here; the server's if absent
    # Seconds without use (no exec, session, viewer, run or preview traffic) after which
    # the box stops, its files kept; 0: never; absent: the server's default.
    idle_stop: int | None = None
    # Automatic (stop) snapshots the box keeps, newest first; absent: the server's.
    keep: int | None = None
    secrets: list[str] = field(default_factory=list)  # your secrets attached to it
    # Made from this template (yours, or one shared with everyone): its files, environment
    # and start command; its defaults fill in what is not given here.
    template: str | None = None


@dataclass
class NetworkSpec:
    mode: NetworkMode
    allow: list[str] = field(default_factory=list)


@dataclass
class EgressEvent:
    """A name a box looked up (kind dns) or a destination it tried (kind connect)."""

    time: str
    kind: EgressKind
    verdict: Verdict
    name: str = ""
    address: str = ""
    port: int = 0
    proto: str = ""
    count: int = 1


@dataclass
class EgressLog:
    events: list[EgressEvent] = field(default_factory=list)


@dataclass
class NetworkSuggestion:
    allow: list[str]  # an allowlist covering what the box used
    based_on: int  # egress log entries considered


@dataclass
class DesktopRequest:
    view_only: bool = False
    size: str | None = None  # WIDTHxHEIGHT; default: as it is (1280x800 when it starts)


@dataclass
class DesktopLink:
    url: str  # open in a browser; carries a short-lived token for this box only
    token: str
    expires_at: datetime
    view_only: bool


@dataclass
class DesktopAction:
    action: DesktopActionName
    x: int | None = None
    y: int | None = None
    button: int = 1
    text: str | None = None
    keys: str | None = None  # e.g. "ctrl+s", "Return", "alt+F4"


@dataclass
class CredentialSet:
    """`mode`: gateway (the default: boxes get a placeholder, the credential gateway adds
    the key on the way out) or env (boxes get the key itself, for a tool that must)."""

    key: str  # write-only: never returned by the API
    base_url: str | None = None  # an OpenAI- or Anthropic-compatible endpoint
    mode: KeyMode | None = None


@dataclass
class Credential:
    provider: str
    configured: bool
    base_url: str | None = None
    last_used_at: datetime | None = None
    mode: KeyMode | None = None  # None: not set


@dataclass
class SecretSet:
    """A secret bound to hosts. `value`: write-only, never returned (absent: keep the
    stored one, to change the hosts). `header` with `format` (`{value}` where the secret
    goes): that header is set whole in requests to the hosts that carry the placeholder;
    without: the placeholder is replaced where it stands (any header, Basic credentials)."""

    hosts: list[str]
    value: str | None = None
    header: str | None = None
    format: str | None = None


@dataclass
class Secret:
    name: str
    hosts: list[str]
    header: str | None = None
    format: str | None = None
    created_at: datetime | None = None
    last_used_at: datetime | None = None
    boxes: list[str] = field(default_factory=list)  # names of the boxes it is attached to


@dataclass
class SecretList:
    secrets: list[Secret] = field(default_factory=list)


@dataclass
class BoxSecrets:
    secrets: list[str] = field(default_factory=list)  # attached to the box


@dataclass
class CredentialUse:
    """One request through the credential gateway with a key or secret: `used` (its
    upstream's `status`), or `refused` (`reason`; status 0 when the request went on with
    the placeholder left as it was)."""

    box: str
    kind: CredentialKind
    name: str
    host: str
    method: str
    path: str
    status: int
    outcome: UseOutcome
    at: datetime
    reason: str | None = None


@dataclass
class CredentialUseList:
    uses: list[CredentialUse] = field(default_factory=list)


@dataclass
class CredentialList:
    providers: list[Credential] = field(default_factory=list)


@dataclass
class BoxAuth:
    providers: list[str] = field(default_factory=list)  # attached to the box


@dataclass
class AgentInfo:
    name: str
    command: str
    package: str
    version: str | None  # None: not in the server's box image
    providers: list[str]
    credentials: bool  # a key for one of its providers is set (`paddock auth set`)
    note: str = ""


@dataclass
class AgentList:
    agents: list[AgentInfo] = field(default_factory=list)


@dataclass
class RunRequest:
    instruction: str
    agent: str | None = None  # default: the server's (`[agents] default`)
    workdir: str | None = None
    model: str | None = None
    json: bool = False  # the agent's structured event stream instead of plain text
    wake: bool = False  # start the box first if it is stopped


@dataclass
class RunInfo:
    id: str
    box: str
    agent: str
    instruction: str
    workdir: str
    model: str | None
    status: RunStatus
    started_at: datetime
    ended_at: datetime | None = None
    exit_code: int | None = None


@dataclass
class RunList:
    runs: list[RunInfo] = field(default_factory=list)


@dataclass
class Box:
    id: str
    name: str
    state: BoxStateName
    desired_state: DesiredStateName
    type: str
    image: str
    created_at: datetime
    ttl: int
    ttl_action: TtlAction
    profile: RuntimeProfile
    started_at: datetime | None = None
    expires_at: datetime | None = None
    snapshots: int = 0
    drives: list[str] = field(default_factory=list)
    network: NetworkSpec | None = None
    agent: str | None = None  # default agent of `paddock prompt` here (None: the server's)
    message: str | None = None  # why the box is in `error`, or what the server repaired
    owner: str | None = None  # the username whose box it is
    mine: bool = True  # whether it is the caller's own (the owner also sees others')
    idle_stop: int = 0  # seconds without use before it stops (0: never)
    keep: int | None = None  # stop snapshots it keeps (None: the server's retention)


@dataclass
class Snapshot:
    id: int
    kind: SnapshotKind  # stop: automatic; live: `paddock snapshot`; fork
    created_at: datetime
    size_bytes: int
    image: str
    label: str | None = None
    current: bool = False  # the box's files were last saved here
    # A copy of the box's disk (snapshots at the speed of metadata), or an engine commit.
    method: Literal["copy", "commit"] = "commit"
    # For a copy: the bytes it holds alone (what removing it frees), and those it shares
    # with the box's disk, its other snapshots and its forks.
    own_bytes: int | None = None
    shared_bytes: int | None = None


@dataclass
class SnapshotList:
    box: str
    snapshots: list[Snapshot]


@dataclass
class SnapshotCreate:
    label: str | None = None


@dataclass
class RestoreRequest:
    snapshot: str  # id or label


@dataclass
class ForkRequest:
    name: str | None = None
    snapshot: str | None = None  # id or label; absent: the box as it is now
    type: str | None = None  # the fork's box type; absent: the source's


@dataclass
class ForksRequest:
    """`count` forks at once, all or none. Named PREFIX-1 .. PREFIX-N with a prefix,
    else generated names."""

    count: int
    name_prefix: str | None = None
    snapshot: str | None = None  # id or label; absent: the box as it is now
    type: str | None = None  # the forks' box type; absent: the source's


@dataclass
class ForkList:
    boxes: list[Box]


@dataclass
class Drive:
    """Drives are per user, so the owner may see several of one name. `owner`: whose it
    is, a username ("(removed user)" once the account is gone); `owner_id`: their id (None
    for the owner's), which names a removed account's drive."""

    name: str
    size_bytes: int
    boxes: list[str]
    owner: str | None = None
    owner_id: str | None = None
    mine: bool = True  # whether it is the caller's own (the owner also sees others')
    capacity_mb: int | None = None  # the most it holds; None: it grows within the server's disk


@dataclass
class DriveList:
    drives: list[Drive]


@dataclass
class DriveCreate:
    """`capacity_mb`: the most the drive holds (64 MiB up; a full drive is "no space left
    on device" in the box). Absent: it grows within the server's disk."""

    name: str
    capacity_mb: int | None = None


@dataclass
class PreviewCreate:
    """`port`: where the box's web server listens (on 0.0.0.0 or 127.0.0.1). `public`: open
    to anyone with the URL, no secret in it. `ttl`: seconds until it ends (0 or absent:
    until removed)."""

    port: int
    public: bool = False
    ttl: int | None = None


@dataclass
class Preview:
    """A URL for a web server in a box. A private one's `url` carries its secret (a
    browser trades it for a cookie on first use); the box's owner, logged in, needs none
    on the path form."""

    id: str
    box: str
    box_id: str
    port: int
    public: bool
    url: str
    created_at: datetime
    expires_at: datetime | None = None


@dataclass
class PreviewList:
    previews: list[Preview]


@dataclass
class BoxList:
    boxes: list[Box]


@dataclass
class ExtendRequest:
    ttl: int  # new time to live in seconds, counted from now; 0 for none


@dataclass
class ExecRequest:
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    tty: bool = False
    stdin: bool = False
    cols: int | None = None
    rows: int | None = None
    desktop: bool = False  # DISPLAY and D-Bus of the box's desktop (started if need be)
    # Return once the command started: on the desktop, its output in the desktop's app
    # log; else in the background, stdout `PID LOG` (its pid, the file of its output).
    detach: bool = False
    wake: bool = False  # start the box first if it is stopped
    # Instead of `cmd`: an SSH session (OpenSSH's `sshd -i` speaking SSH on stdin and
    # stdout, the box's host key, the caller's registered keys). WebSocket only.
    ssh: bool = False


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class PushResult:
    path: str
    bytes: int


# A copy's tar, placed in the box by docker cp's rules: one SRC sent whole (a file or a
# folder, its name on top of the tar), or into DEST as a folder (several SRCs, or one's
# contents).
CopyKind = Literal["file", "dir", "into"]


FileKind = Literal["file", "dir", "symlink", "other"]


@dataclass
class FileEntry:
    name: str
    type: FileKind  # the entry itself: a link is "symlink"
    size: int
    mode: int  # permission bits
    modified: datetime
    target: str | None = None  # a link's target, as written
    # what a link leads to ("missing": nothing there, or a loop); None for the rest
    target_type: Literal["file", "dir", "other", "missing"] | None = None


@dataclass
class FileList:
    path: str  # the folder, absolute, as listed
    entries: list[FileEntry]  # by name
    truncated: bool  # more entries than the listing's cap


@dataclass
class EngineStatus:
    reachable: bool
    image: str
    version: str | None = None
    profile: RuntimeProfile | None = None
    image_present: bool = False
    error: str | None = None
    # The box image was built by an older Paddock (or before the host's CA certificates
    # changed): `paddock image build` makes the newer one. None: not known (no image).
    image_pending: bool | None = None


@dataclass
class Capacity:
    """What running boxes claim of what they may (docs/server.md "Capacity"). `cpus_total`
    None: CPU is shared by weight, not counted. `memory_overcommit`: the claims' total
    over the host's memory after the reserve (None: set by hand). `memory_available_mb`:
    the host's memory available now (owner only), beside the reserve a new box leaves."""

    cpus_total: float | None
    cpus_used: float
    memory_total_mb: int
    memory_used_mb: int
    memory_overcommit: float | None = None
    memory_reserve_mb: int = 0
    memory_available_mb: int | None = None


@dataclass
class BoxStats:
    """What a box uses now; figures only while it runs (None otherwise)."""

    id: str
    name: str
    state: BoxStateName
    cpus: float  # its type's share of CPU
    cpu_percent: float | None = None  # 100 = one whole CPU, as `docker stats` counts
    memory_bytes: int | None = None  # without page cache the kernel can drop
    memory_limit_bytes: int | None = None
    disk_bytes: int | None = None  # its writable layer and its /var/lib/docker volume
    disk_quota_bytes: int | None = None  # its root filesystem's size; None: not enforced
    pids: int | None = None  # processes (and threads)
    pids_limit: int | None = None


@dataclass
class BoxStatsList:
    boxes: list[BoxStats]


@dataclass
class PoolTypeStatus:
    type: str
    size: int  # ready boxes the pool keeps of this type
    ready: int
    making: int = 0


@dataclass
class PoolStatus:
    """The warm pool: boxes made before they are asked for, which a `new` claims at once.
    They are no one's yet, and hold their CPU and memory against the capacity until a
    box needs it."""

    max_boxes: int  # all types together; 0: the pool is off
    types: list[PoolTypeStatus]
    cpus: float  # what the pool holds
    memory_mb: int
    note: str | None = None  # why it is not full, when it cannot be


@dataclass
class ServerStatus:
    version: str
    engine: EngineStatus
    capacity: Capacity
    boxes_running: int
    boxes_stopped: int
    # What needs the admin's eye, one sentence each (e.g. a box whose isolation failed).
    problems: list[str] = field(default_factory=list)
    # The filesystem of the engine's data root (box layers, volumes, snapshots).
    data_root: str | None = None
    data_root_free_bytes: int | None = None
    disk_limits: str | None = None  # how boxes' disks are limited, in words
    data_root_total_bytes: int | None = None
    pool: PoolStatus | None = None
    # How snapshots, restores and forks are made here: "copy", copies of a box's disk at
    # the speed of metadata (reflinks); "commit", engine commits that copy every change.
    snapshots: Literal["copy", "commit"] | None = None


@dataclass
class ErrorDetail:
    code: str  # stable: clients branch on it (e.g. not_found, invalid_request, conflict)
    message: str  # for people
    details: Any = None


@dataclass
class ErrorBody:
    """Every error the API answers, whatever the status."""

    error: ErrorDetail


@dataclass
class ImageBuildRequest:
    no_cache: bool = False
    rebuild_base: bool = False
    upgrade_agents: bool = False  # move the agents to their latest versions first


# -- the client's parser ----------------------------------------------------------------


T = TypeVar("T")


def from_wire(cls: type[T], data: dict[str, Any]) -> T:
    """Build `cls` from a JSON object; unknown keys (a newer server) are ignored."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return cls(**{f.name: _convert(str(f.type), data[f.name]) for f in fields if f.name in data})


def _convert(annotation: str, value: Any) -> Any:
    if value is None:
        return None
    base = annotation.split(" | ")[0]
    if base.startswith("list["):
        return [_convert(base[5:-1], v) for v in value]
    if base == "datetime":
        # Python 3.10's fromisoformat does not read the "Z" suffix pydantic writes.
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    model = globals().get(base)
    if isinstance(model, type) and dataclasses.is_dataclass(model):
        return from_wire(model, value)
    return value


def to_wire(obj: Any) -> Any:
    """A model as JSON-ready data (datetimes as ISO 8601)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_wire(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [to_wire(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


@dataclass
class DeviceStart:
    """`client`: how the device names itself on the approval page (e.g. "paddock CLI on
    laptop")."""

    client: str = "paddock CLI"


@dataclass
class DeviceCode:
    """`device_code` is the device's secret for polling; a person enters `user_code` at
    `verification_uri` (or opens `verification_uri_complete`) while logged in."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    interval: int
    expires_in: int


@dataclass
class DevicePoll:
    device_code: str


@dataclass
class DeviceToken:
    """`status`: pending (ask again after `interval`), approved (`token` is the API token,
    given this once), denied or expired."""

    status: str
    token: str | None = None


@dataclass
class TokenCreate:
    """`expires_in`: seconds the token stays valid (60 to 10 years); absent: until revoked.
    `scope` "metrics": a token that reads /metrics and nothing else (the owner's, for a
    Prometheus scraper)."""

    name: str
    expires_in: int | None = None
    scope: Literal["metrics"] | None = None


@dataclass
class TokenInfo:
    """`user`: whose it is (None: made on the server with `paddockd token create`, the
    owner's); the owner sees everyone's tokens, a member their own."""

    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None = None
    user: str | None = None
    expires_at: datetime | None = None
    scope: Literal["metrics"] | None = None


@dataclass
class TokenList:
    tokens: list[TokenInfo]


@dataclass
class NewToken:
    """`token` is shown this once; only its hash is kept."""

    id: str
    name: str
    token: str
    created_at: datetime
    expires_at: datetime | None = None
    scope: Literal["metrics"] | None = None


@dataclass
class InviteCreate:
    role: str = "member"  # or "owner"


@dataclass
class Invite:
    """A one-time link that creates an account with `role`; it expires at `expires_at`."""

    url: str
    role: str
    expires_at: datetime


@dataclass
class MemberLimits:
    """What a member may claim (null: no limit of their own; the server's capacity still
    applies): boxes running or stopped, and CPUs and memory (MiB) of running boxes."""

    max_boxes: int | None = None
    max_cpus: float | None = None
    max_memory_mb: int | None = None


@dataclass
class Member:
    username: str
    role: str
    created_at: datetime
    boxes: int
    limits: MemberLimits = field(default_factory=MemberLimits)


@dataclass
class MemberList:
    members: list[Member]


@dataclass
class MemberRemoved:
    """What removing a member did: their tokens revoked, their running boxes stopped (the
    boxes are kept, for the owner)."""

    username: str
    tokens_revoked: int
    boxes_stopped: list[str]


@dataclass
class TemplateDefaults:
    """What `new --template` takes unless told otherwise."""

    type: str | None = None
    ttl: int | None = None
    network: NetworkMode | None = None
    allow: list[str] = field(default_factory=list)
    drives: list[str] = field(default_factory=list)
    idle_stop: int | None = None


@dataclass
class Template:
    """A starting point for boxes: a box's files (from a Dockerfile built in a box, or taken
    from a box), and what a box made from it gets beside them. `stale`: why it is behind
    what it was built on (None: it is not)."""

    name: str
    status: TemplateStatus
    base: str  # paddock-box, or the template it was built on
    owner: str
    mine: bool
    shared: bool
    size_bytes: int
    created_at: datetime
    source: Literal["dockerfile", "box"]
    message: str | None = None
    built_at: datetime | None = None
    stale: str | None = None
    env: list[str] = field(default_factory=list)  # NAME=value
    user: str | None = None
    workdir: str | None = None
    start_cmd: str | None = None
    defaults: TemplateDefaults = field(default_factory=TemplateDefaults)


@dataclass
class TemplateList:
    templates: list[Template] = field(default_factory=list)


@dataclass
class TemplateFromBox:
    """A template of a box's files (`snapshot`: as one of its snapshots keeps them)."""

    name: str
    box: str
    snapshot: str | None = None
    env: list[str] = field(default_factory=list)  # NAME=value, on top of the box's
    start_cmd: str | None = None
    defaults: TemplateDefaults = field(default_factory=TemplateDefaults)


@dataclass
class TemplateShare:
    shared: bool


@dataclass
class SshKey:
    """A public key of yours that may log in to your boxes over `paddock ssh`."""

    name: str
    type: str
    fingerprint: str  # SHA256:..., as `ssh-keygen -l` prints it
    comment: str
    created_at: datetime


@dataclass
class SshKeyList:
    keys: list[SshKey]


@dataclass
class NewSshKey:
    public_key: str  # one OpenSSH line, e.g. the contents of ~/.ssh/id_ed25519.pub


@dataclass
class SshHostKey:
    """The box's own SSH host key, for a known_hosts line (pinned: a change is refused)."""

    host_key: str  # "ssh-ed25519 AAAA..."
    fingerprint: str
    user: str  # whom `ssh` logs in as unless told (the box user)


@dataclass
class AuditEvent:
    """A call that changed something, or was refused (`paddock audit`). `actor`: who
    (`anonymous` where no one signed in); `credential`: how (`token pdk_AbCd…`, `session`,
    `e2b key pdk_AbCd…`, `envd token`, `signed link`); `action`: method and route; `target`:
    what the route named (`ref=web`); `outcome`: ok, failed or refused."""

    at: datetime
    actor: str
    credential: str
    source: str
    action: str
    target: str
    status: int
    outcome: str


@dataclass
class AuditLog:
    events: list[AuditEvent]


@dataclass
class EventBox:
    id: str
    name: str


@dataclass
class PaddockEvent:
    """Something that happened to a box (`/v1/events`' `box-event`, and what a webhook
    receives): `type` is box.created, box.started, box.stopped (`data.reason`: user, ttl,
    idle), box.deleted, box.error, snapshot.taken, run.finished or egress.refused; `at`
    a Unix time."""

    id: str
    type: str
    at: float
    box: EventBox
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class WebhookRequest:
    """A webhook to add: where to POST (http or https), and which event types (empty:
    every one: box.created, box.started, box.stopped, box.deleted, box.error,
    snapshot.taken, run.finished, egress.refused)."""

    url: str
    events: list[str] = field(default_factory=list)


@dataclass
class Webhook:
    """Where box events are delivered, signed (`paddock webhook`). `boxes`: `all` for a
    server owner's (every box's events), `own` for a member's (their boxes' only)."""

    id: str
    url: str
    events: list[str]
    boxes: Literal["all", "own"]
    created_at: datetime


@dataclass
class NewWebhook:
    """A webhook just added, and the secret its deliveries are signed with: shown once."""

    webhook: Webhook
    secret: str


@dataclass
class WebhookList:
    webhooks: list[Webhook]


@dataclass
class WebhookDelivery:
    """One event's delivery to a webhook. `state`: pending (being tried; `next_at` is the
    next try), delivered, or failed (after its last try). `status`: the receiver's last
    HTTP status; `error`: why it could not be reached."""

    id: int
    event_id: str
    event_type: str
    box_id: str
    created_at: datetime
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    next_at: datetime | None = None
    status: int | None = None
    error: str | None = None


@dataclass
class WebhookDeliveries:
    deliveries: list[WebhookDelivery]


@dataclass
class WebhookTest:
    """What the receiver said to a `webhook.test` event, tried once."""

    delivered: bool
    status: int | None = None
    error: str | None = None


@dataclass
class Setting:
    """One of the server's settings (`paddock settings`): its value now, the file's (or
    the built-in default: what a reset returns to), and where the value comes from:
    `default`, `file` (paddockd.toml) or `set` (changed by the owner since). `kind` says
    what it takes: duration (seconds, or 90m, 2h, 1d), number, integer, text, choice
    (one of `choices`), list (comma-separated), sizes (TYPE=N pairs) or type (a box
    type's cpus, memory_mb, pids, disk_mb, description)."""

    key: str
    kind: Literal["duration", "number", "integer", "text", "choice", "list", "sizes", "type"]
    help: str
    value: Any
    file_value: Any
    source: Literal["default", "file", "set"]
    choices: list[str] = field(default_factory=list)


@dataclass
class SettingList:
    settings: list[Setting]


@dataclass
class SettingChange:
    """A setting's new value: as JSON, or as text the way the command line gives it."""

    value: Any


@dataclass
class ServerLogLine:
    """One of paddockd's own log messages (`paddock logs --server`), secrets masked."""

    at: datetime
    level: str
    logger: str
    message: str


@dataclass
class ServerLog:
    lines: list[ServerLogLine]
