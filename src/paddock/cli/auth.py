"""`paddock auth ...`: model-provider API keys, kept encrypted by the server and given only
to the boxes (or agent runs) they are attached to."""

from __future__ import annotations

import argparse
import sys

from .._exceptions import InvalidRequest
from ._common import add_json, box_ref, client
from ._output import emit_json, note, table

USAGE = """paddock auth set PROVIDER [--from-stdin] [--base-url URL]
       paddock auth ls [--json]
       paddock auth rm PROVIDER
       paddock auth attach BOX PROVIDER | detach BOX PROVIDER"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "auth",
        help="model-provider API keys for the agents in boxes",
        usage=USAGE,
        description="Providers: anthropic, openai, openrouter, moonshot; --base-url points one "
        "at an OpenAI- or Anthropic-compatible endpoint. A key is read from a prompt or "
        "stdin, never from the command line; the server stores it encrypted and never "
        "returns it. `attach` gives a box's commands the key (e.g. ANTHROPIC_API_KEY), so "
        "`paddock shell BOX` can run `claude` directly; no box gets a key it was not given.",
        epilog="examples:\n  paddock auth set anthropic\n"
        "  printenv OPENAI_API_KEY | paddock auth set openai --from-stdin\n"
        "  paddock auth set openai --base-url http://10.0.0.5:8000/v1\n"
        "  paddock auth attach current anthropic\n  paddock auth ls",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["set", "ls", "rm", "attach", "detach"])
    p.add_argument("args", nargs="*", metavar="ARG")
    p.add_argument("--from-stdin", action="store_true", help="set: read the key from stdin")
    p.add_argument("--base-url", help="set: the provider's endpoint (compatible APIs)")
    add_json(p)
    p.set_defaults(run=cmd_auth)

    p = sub.add_parser(
        "agents",
        help="the coding agents in boxes, their versions, and whether they have a key",
        description="List the coding agents in the server's box image (claude, codex, "
        "opencode, pi, prime, kimi), their versions, and whether an API key for one of "
        "their providers is set (`paddock auth set`). Upgrade them with "
        "`paddock image build --upgrade-agents`.",
    )
    add_json(p)
    p.set_defaults(run=cmd_agents)


def cmd_agents(args: argparse.Namespace) -> int:
    with client(args) as c:
        agents = c.list_agents()
    if args.json:
        emit_json(agents)
        return 0
    table(
        ["AGENT", "VERSION", "PROVIDERS", "KEY"],
        [
            [
                a.name,
                a.version or "-",
                ",".join(a.providers),
                "set" if a.credentials else f"missing: paddock auth set {a.providers[0]}",
            ]
            for a in agents
        ],
    )
    for a in agents:
        if a.note:
            note(f"{a.name}: {a.note}")
    return 0


def _want(args: argparse.Namespace, n: int, usage: str) -> list[str]:
    if len(args.args) != n:
        raise InvalidRequest(f"usage: paddock auth {usage}")
    words: list[str] = args.args
    return words


def read_key(from_stdin: bool, provider: str) -> str:
    if from_stdin:
        return sys.stdin.readline().strip()
    if not sys.stdin.isatty():
        raise InvalidRequest("no terminal to ask on: pipe the key in with --from-stdin")
    import getpass

    return getpass.getpass(f"{provider} API key (input hidden): ").strip()


def cmd_auth(args: argparse.Namespace) -> int:
    with client(args) as c:
        if args.action == "set":
            (provider,) = _want(args, 1, "set PROVIDER")
            status = c.set_credential(
                provider, read_key(args.from_stdin, provider), base_url=args.base_url
            )
            note(
                f"{status.provider}: key stored"
                + (f" ({status.base_url})" if status.base_url else "")
            )
        elif args.action == "rm":
            (provider,) = _want(args, 1, "rm PROVIDER")
            c.delete_credential(provider)
            note(f"{provider}: key removed (and detached from every box)")
        elif args.action in ("attach", "detach"):
            box, provider = _want(args, 2, f"{args.action} BOX PROVIDER")
            fn = c.attach_credential if args.action == "attach" else c.detach_credential
            ref = box_ref(box)
            attached = fn(ref, provider)
            note(f"box {ref}: {', '.join(attached) or 'no providers'} attached")
        else:
            _want(args, 0, "ls")
            rows = c.list_credentials()
            if args.json:
                emit_json(rows)
            else:
                table(
                    ["PROVIDER", "KEY", "BASE URL", "LAST USED"],
                    [
                        [
                            r.provider,
                            "set" if r.configured else "-",
                            r.base_url or "",
                            f"{r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "",
                        ]
                        for r in rows
                    ],
                )
    return 0
