"""Model-provider credentials: which providers there are, the environment each agent
reads, and what a valid key and base URL look like."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlparse

from .errors import InvalidRequest


@dataclass(frozen=True)
class Provider:
    name: str
    key_env: str
    base_url_env: str


PROVIDERS = {
    p.name: p
    for p in (
        Provider("anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        Provider("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        Provider("openrouter", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"),
        Provider("moonshot", "MOONSHOT_API_KEY", "MOONSHOT_BASE_URL"),
        # Prime's model endpoint; its PRIME_BASE_URL is the platform API (pods, evals).
        Provider("prime", "PRIME_API_KEY", "PRIME_INFERENCE_URL"),
    )
}
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
