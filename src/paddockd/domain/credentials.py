"""Model-provider credentials: which providers there are, the environment each agent
reads, where each provider's API is, what a valid key and base URL look like, and the
placeholders boxes hold instead of keys (the credential gateway swaps them back)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Literal, get_args
from urllib.parse import urlparse

from .errors import InvalidRequest


@dataclass(frozen=True)
class Provider:
    name: str
    key_env: str
    base_url_env: str
    # The API's base URL when none is set, as the agents' own defaults have it (Anthropic's
    # without /v1: its clients append it).
    upstream: str


PROVIDERS = {
    p.name: p
    for p in (
        Provider(
            "anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"
        ),
        Provider("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
        Provider(
            "openrouter",
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
            "https://openrouter.ai/api/v1",
        ),
        Provider("moonshot", "MOONSHOT_API_KEY", "MOONSHOT_BASE_URL", "https://api.moonshot.ai/v1"),
        # Prime's model endpoint; its PRIME_BASE_URL is the platform API (pods, evals).
        Provider(
            "prime", "PRIME_API_KEY", "PRIME_INFERENCE_URL", "https://api.pinference.ai/api/v1"
        ),
    )
}

KeyMode = Literal["gateway", "env"]
KEY_MODES: tuple[KeyMode, ...] = get_args(KeyMode)
PlaceholderKind = Literal["provider", "secret"]

# What a box holds instead of a key: random, useless anywhere but through the gateway,
# from the one box it was made for. Shaped like a key so tools that check one accept it.
_PLACEHOLDER_PREFIX = {"provider": "sk-paddock-", "secret": "paddock-secret-"}
PLACEHOLDER_RE = re.compile(rb"(?:sk-paddock-|paddock-secret-)[0-9a-f]{40}")


def new_placeholder(kind: PlaceholderKind) -> str:
    return _PLACEHOLDER_PREFIX[kind] + secrets.token_hex(20)


def check_mode(mode: str | None) -> KeyMode:
    if mode is None:
        return "gateway"
    for known in KEY_MODES:
        if mode == known:
            return known
    raise InvalidRequest(
        f"unknown key mode {mode!r}: gateway (the box gets a placeholder; the default) or env "
        "(the box gets the key itself)"
    )


def upstream_of(p: Provider, base_url: str | None) -> str:
    """Where the gateway sends a box's requests for this provider."""
    url = (base_url or p.upstream).rstrip("/")
    # Anthropic's clients append /v1 themselves (see domain/agents.py `adapt`).
    return url.removesuffix("/v1") if p.name == "anthropic" else url


_KEY_RE = re.compile(r"^[\x21-\x7e]{8,4096}$")  # printable, no spaces or newlines


def provider(name: str) -> Provider:
    found = PROVIDERS.get(name.strip().lower())
    if found is None:
        raise InvalidRequest(
            f"unknown provider {name!r}: use one of {', '.join(PROVIDERS)} "
            "(with --base-url for an OpenAI- or Anthropic-compatible endpoint)"
        )
    return found


def check_key(key: str) -> str:
    key = key.strip()
    if not _KEY_RE.match(key):
        raise InvalidRequest(
            "that does not look like an API key (8 to 4096 printable characters, no spaces)"
        )
    return key


def check_base_url(url: str | None) -> str | None:
    if not url:
        return None
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidRequest(f"invalid base URL {url!r}: use http(s)://host[:port][/path]")
    return url.strip().rstrip("/")
