"""The coding agents a box image carries: what runs them and which providers they use."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidRequest

# Moonshot's current flagship in Kimi Code's own model catalog.
KIMI_DEFAULT_MODEL = "kimi-k3"
# The model Prime's own CLI defaults to for evaluations.
PRIME_DEFAULT_MODEL = "openai/gpt-4.1-mini"


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
    # (its variable, the provider's): for agents that read a key under a name of their own.
    aliases: tuple[tuple[str, str], ...] = ()

    def adapt(self, env: dict[str, str]) -> dict[str, str]:
        """The provider environment as this agent reads it, plus its own settings."""
        env = {**env, **dict(self.env)}
        env.update({mine: env[theirs] for mine, theirs in self.aliases if theirs in env})
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
            "@moonshot-ai/kimi-code",
            ("moonshot",),
            # Kimi Code takes a whole model from KIMI_MODEL_* (it needs the name too);
            # `--model` replaces the default name.
            env=(
                ("KIMI_MODEL_PROVIDER_TYPE", "kimi"),
                ("KIMI_MODEL_NAME", KIMI_DEFAULT_MODEL),
                ("KIMI_CODE_NO_AUTO_UPDATE", "1"),
                ("KIMI_DISABLE_TELEMETRY", "1"),
            ),
            aliases=(
                ("KIMI_MODEL_API_KEY", "MOONSHOT_API_KEY"),
                ("KIMI_MODEL_BASE_URL", "MOONSHOT_BASE_URL"),
            ),
        ),
    )
}


def shell_env(env: dict[str, str]) -> dict[str, str]:
    """Attached keys as a box's own commands see them: also under the names of agents that
    read a provider's key only under a name of their own, so `kimi` in a shell works too."""
    out = dict(env)
    for agent in AGENTS.values():
        if agent.aliases and any(theirs in env for _, theirs in agent.aliases):
            out.update({k: v for k, v in agent.adapt(env).items() if k not in env})
    return out


def check_agent(name: str | None) -> str | None:
    if name is not None and name not in AGENTS:
        raise InvalidRequest(f"unknown agent {name!r}: use one of {', '.join(AGENTS)}")
    return name


def versions_from_label(label: str | None) -> dict[str, str]:
    """The image's `paddock.agents` label: name=version,name=version."""
    pairs = (item.rpartition("=") for item in (label or "").split(",") if "=" in item)
    return {name: version for name, _, version in pairs}
