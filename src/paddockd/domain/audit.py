"""The audit log's entries: who did what to what, from where, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class AuditEntry:
    """One call that changed something, or was refused. `actor`: a username, or
    `anonymous`; `user_id`: theirs ("" for the server's own tokens, None for anonymous);
    `credential`: how they signed in (`token pdk_AbCd…`, `session`, `e2b key`, `envd token`,
    `signed link`), never the secret; `action`: method and route (`POST /v1/boxes/{ref}/exec`);
    `target`: the route's names (`ref=web`), secrets left out; `status`: the HTTP answer."""

    at: float
    actor: str
    user_id: str | None
    credential: str
    source: str
    action: str
    target: str
    status: int

    @property
    def outcome(self) -> str:
        if self.status in (401, 403):
            return "refused"
        return "ok" if self.status < 400 else "failed"
