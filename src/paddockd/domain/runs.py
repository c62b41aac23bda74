"""Agent runs (`paddock prompt`): what one is, and the command line each agent is run
headless with."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Literal

from .agents import AGENTS, PRIME_DEFAULT_MODEL
from .errors import InvalidRequest

RunStatus = Literal["running", "succeeded", "failed", "stopped", "lost"]
RUN_STATES: tuple[RunStatus, ...] = ("running", "succeeded", "failed", "stopped", "lost")
_MODEL_RE = re.compile(r"^[A-Za-z0-9._:/@-]{1,128}$")


@dataclass(frozen=True)
class Run:
    id: str
    box_id: str
    box_name: str
    agent: str
    instruction: str
    workdir: str
    model: str | None
    status: RunStatus
    started_at: float
    ended_at: float | None = None
    exit_code: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Run:
        """ValueError for anything that is not a whole, well-formed record."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a run record")
        try:
            run = cls(**data)
        except TypeError as exc:
            raise ValueError(f"not a run record: {exc}") from exc
        text_fields = (run.id, run.box_id, run.box_name, run.agent, run.instruction, run.workdir)
        if not all(isinstance(v, str) for v in text_fields) or not run.id.isalnum():
            raise ValueError("not a run record: a field has the wrong type")
        if run.status not in RUN_STATES or not isinstance(run.started_at, (int, float)):
            raise ValueError(f"not a run record: status {run.status!r}")
        return run


def headless(
    agent: str,
    instruction: str,
    model: str | None,
    as_json: bool,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The agent's own non-interactive mode: it works without asking, since the box is the
    sandbox. `env` is the provider environment the run gets (for agents that take a custom
    endpoint only as an option)."""
    if not instruction.strip():
        raise InvalidRequest("no instruction given")
    if model is not None and not _MODEL_RE.match(model):
        raise InvalidRequest(f"invalid model name {model!r}")
    m = ["--model", model] if model else []
    if agent == "claude":
        fmt = ["--output-format", "stream-json", "--verbose"] if as_json else []
        return ["claude", "-p", *fmt, *m, "--dangerously-skip-permissions", "--", instruction]
    if agent == "codex":
        # Codex ignores OPENAI_BASE_URL: a custom endpoint is a provider of its own.
        base = (env or {}).get("OPENAI_BASE_URL")
        provider = (
            [
                "-c",
                "model_provider=paddock",
                "-c",
                f'model_providers.paddock={{ name = "Paddock", base_url = {json.dumps(base)}, '
                'env_key = "OPENAI_API_KEY", wire_api = "responses" }',
            ]
            if base
            else []
        )
        return [
            "codex", "exec", "--skip-git-repo-check", *provider,
            "--dangerously-bypass-approvals-and-sandbox", *(["--json"] if as_json else []),
            *(["-m", model] if model else []), "--", instruction,
        ]  # fmt: skip
    if agent == "opencode":
        return ["opencode", "run", *(["--format", "json"] if as_json else []), *m, instruction]
    if agent == "pi":
        return ["pi", "-p", *(["--mode", "json"] if as_json else []), *m, instruction]
    if agent == "kimi":
        # Its -m takes an alias from its config file; a model by name is an env variable.
        # In prompt mode Kimi Code approves its own tool calls.
        return [
            *(["env", f"KIMI_MODEL_NAME={model}"] if model else []),
            "kimi", *(["--output-format", "stream-json"] if as_json else []),
            f"--prompt={instruction}",
        ]  # fmt: skip
    if agent == "prime":
        # Prime's CLI is not a coding agent: a one-shot chat with a Prime Inference model,
        # without tools.
        fmt = ["--output", "json"] if as_json else ["--stream"]
        return ["prime", "--plain", "inference", "chat", *fmt, "--", model or PRIME_DEFAULT_MODEL,
                instruction]  # fmt: skip
    raise InvalidRequest(f"unknown agent {agent!r}: use one of {', '.join(AGENTS)}")
