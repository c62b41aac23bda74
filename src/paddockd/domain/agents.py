"""The coding agents a box image carries: what runs them and which providers they use."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidRequest


@dataclass(frozen=True)
class Agent:
    name: str
    command: str
    package: str  # its npm or PyPI name, as pinned in images/agents.json
    providers: tuple[str, ...]  # any one of these is enough
    note: str = ""
    # For headless runs: versions are pinned by the image, so no self-updates, and no
    # traffic a sandbox has no use for.
    env: tuple[tuple[str, str], ...] = ()
    # Anthropic-compatible base URLs: Claude Code appends /v1 itself, agents on the AI SDK
    # (OpenCode) expect it in the URL. One URL set with `paddock auth` serves both.
    anthropic_v1: bool = False
    # Shell run (as the box user, with the run's environment) just before the agent: for
    # agents that take a custom endpoint only from their own config file.
    prepare: str = ""

    def adapt(self, env: dict[str, str]) -> dict[str, str]:
        """The provider environment as this agent reads it, plus its own settings."""
        env = {**env, **dict(self.env)}
        base = env.get("ANTHROPIC_BASE_URL")
        if base:
            root = base.rstrip("/").removesuffix("/v1")
            env["ANTHROPIC_BASE_URL"] = root + "/v1" if self.anthropic_v1 else root
        return env


AGENTS = {
    a.name: a
    for a in (
        Agent(
            "claude",
            "claude",
            "@anthropic-ai/claude-code",
            ("anthropic",),
            env=(("DISABLE_AUTOUPDATER", "1"), ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")),
        ),
        Agent("codex", "codex", "@openai/codex", ("openai",)),
        Agent(
            "opencode",
            "opencode",
            "opencode-ai",
            ("anthropic", "openai", "openrouter"),
            anthropic_v1=True,
        ),
        Agent(
            "pi",
            "pi",
            "@mariozechner/pi-coding-agent",
            ("anthropic", "openai", "openrouter"),
            # Pi reads base URLs only from ~/.pi/agent/models.json: write one when there is
            # none (a user's own file is left alone).
            prepare=(
                'f="$HOME/.pi/agent/models.json"; '
                'if [ -n "${ANTHROPIC_BASE_URL:-}" ] && [ ! -e "$f" ]; then '
                'mkdir -p "${f%/*}" && '
                'printf \'{"providers": {"anthropic": {"baseUrl": "%s"}}}\\n\' '
                '"$ANTHROPIC_BASE_URL" > "$f"; fi'
            ),
        ),
        Agent("prime", "prime", "prime", ("prime",)),
        Agent(
            "kimi",
            "kimi",
            "kimi-cli",
            ("moonshot",),
            "not in the image: kimi-cli needs Python >= 3.12 and boxes have Debian 12's 3.11 "
            "(docs/agents.md says how to add it)",
        ),
    )
}


def check_agent(name: str | None) -> str | None:
    if name is not None and name not in AGENTS:
        raise InvalidRequest(f"unknown agent {name!r}: use one of {', '.join(AGENTS)}")
    return name


def versions_from_label(label: str | None) -> dict[str, str]:
    """The image's `paddock.agents` label: name=version,name=version."""
    pairs = (item.rpartition("=") for item in (label or "").split(",") if "=" in item)
    return {name: version for name, _, version in pairs}
