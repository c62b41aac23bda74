"""e2b: what E2B's own SDKs need to talk to this Paddock server (and never to E2B's cloud)."""

from __future__ import annotations

import argparse
import shlex

from .._config import ClientConfig
from ..wire.keys import e2b_key
from ._common import UsageError, examples, nested
from ._output import emit_json, note


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "e2b",
        help="point E2B's SDKs at this server",
        description="E2B's Python and npm SDKs run unchanged against Paddock's E2B-compatible "
        "API (docs/e2b.md). `paddock e2b env` prints the environment they need for the server "
        "this CLI is logged in to: every URL on this server, none at E2B's cloud.",
    )
    e2b = nested(p)
    env = e2b.add_parser(
        "env",
        help="print the E2B_* variables for this server, as export lines",
        description="Print `export` lines for E2B_API_URL, E2B_SANDBOX_URL, "
        "E2B_VOLUME_API_URL, E2B_DOMAIN (a name "
        "that resolves nowhere, so nothing can fall back to e2b.app) and, on plain HTTP, "
        "E2B_HTTP_VERSION=1.1. The API key is the CLI's own token, printed only with "
        "--with-token (it is a credential; a token of its own is better: `paddock token "
        "create e2b`).",
        epilog=examples("paddock e2b env", 'eval "$(paddock e2b env --with-token)"'),
        run=cmd_env,
        json=True,
    )
    env.add_argument(
        "--with-token", action="store_true", help="include E2B_API_KEY (this CLI's token)"
    )


def variables(url: str, token: str | None) -> dict[str, str]:
    """The E2B SDKs' settings for the Paddock server at `url`."""
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"the CLI's server URL {url!r} is not http(s): run `paddock login`")
    found = {
        "E2B_API_URL": f"{base}/e2b",
        "E2B_SANDBOX_URL": f"{base}/e2b/sandbox",
        # Volumes' content calls come here too (answered: not served), never to api.DOMAIN.
        "E2B_VOLUME_API_URL": f"{base}/e2b",
        "E2B_DOMAIN": "paddock.invalid",
    }
    if base.startswith("http://"):
        found["E2B_HTTP_VERSION"] = "1.1"  # uvicorn offers no HTTP/2 without TLS
    if token:
        # In E2B's key format, which SDKs up to 2.45 insist on (paddock/wire/keys.py).
        found["E2B_API_KEY"] = e2b_key(token)
    return found


def cmd_env(args: argparse.Namespace) -> int:
    cfg = ClientConfig.load()
    if args.with_token and not cfg.token:
        raise UsageError("the CLI has no token: run `paddock login` first")
    found = variables(cfg.url, cfg.token if args.with_token else None)
    if args.json:
        emit_json(found)
        return 0
    for name, value in found.items():
        print(f"export {name}={shlex.quote(value)}")
    if not args.with_token:
        note(
            "E2B_API_KEY is a Paddock token: `paddock token create e2b` makes one "
            "(or add --with-token for this CLI's own)"
        )
    return 0
