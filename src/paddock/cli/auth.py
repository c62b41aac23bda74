"""`paddock auth ...`: model-provider API keys, kept encrypted by the server and given only
to the boxes (or agent runs) they are attached to."""

from __future__ import annotations

import argparse

from ._common import AGENTS, PROVIDERS, box_ref, call, client, examples, nested
from ._output import listing, note
from .secret import add_attachments, add_log_options, read_hidden, show_uses


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "auth",
        help="model-provider API keys for the agents in boxes",
        description=f"Providers: {', '.join(PROVIDERS)}; --base-url points one at an OpenAI- "
        "or Anthropic-compatible endpoint. A key is read from a prompt or stdin, never from "
        "the command line; the server stores it encrypted and never returns it. Keys are per "
        "user: set, ls and rm act on yours. `attach` gives a box's commands its owner's key "
        "(ANTHROPIC_API_KEY and the like), so `paddock shell BOX` can run `claude` directly; "
        "no box gets a key it was not given, nor anyone's but its owner's. By default (mode "
        "gateway) the box gets a placeholder and the base URL of the server's credential "
        "gateway, which puts the key in on the way to the provider: the key itself never "
        "enters the box. --mode env gives the box the key, for a tool that must have it.",
        epilog=examples(
            "paddock auth set anthropic",
            "printenv OPENAI_API_KEY | paddock auth set openai --from-stdin",
            "paddock auth set openai --base-url http://10.0.0.5:8000/v1",
            "paddock auth set openrouter --mode env",
            "paddock auth attach current anthropic",
            "paddock auth ls",
            "paddock auth log --box current",
        ),
    )
    auth = nested(p)
    s = auth.add_parser(
        "set",
        help="store a provider's API key (from a prompt or stdin)",
        description="Store your API key for a provider on the server, encrypted. It is read from a "
        "hidden prompt, or from stdin with --from-stdin; never from the command line.",
        run=cmd_set,
    )
    s.add_argument("provider", metavar="PROVIDER", help=", ".join(PROVIDERS))
    s.add_argument("--from-stdin", action="store_true", help="read the key from stdin")
    s.add_argument("--base-url", help="the provider's endpoint (compatible APIs)")
    s.add_argument(
        "--mode",
        choices=["gateway", "env"],
        help="gateway (default): boxes get a placeholder, the key stays on the server; "
        "env: boxes get the key itself",
    )
    auth.add_parser(
        "ls",
        help="the providers, and which you have a key for",
        description="Every provider: whether you set a key, its base URL, when it was last used.",
        run=cmd_ls,
        json=True,
    )
    rm = auth.add_parser(
        "rm",
        help="remove your key for a provider (and detach it from every box)",
        description="Remove your key for a provider from the server; every box of yours it "
        "was attached to loses it.",
        run=cmd_rm,
    )
    rm.add_argument("provider", metavar="PROVIDER")
    log = auth.add_parser(
        "log",
        help="what your keys were used for",
        description="Each request a box made with one of your keys through the credential "
        "gateway, newest first: the box, the provider, the request's method and path, the "
        "provider's answer, and refusals (another box's placeholder, a detached key).",
        run=cmd_log,
    )
    log.add_argument("provider", metavar="PROVIDER", nargs="?", help="only this provider's")
    add_log_options(log)
    add_attachments(
        auth, "credential", "PROVIDER", "a provider's key (its environment, e.g. ANTHROPIC_API_KEY)"
    )

    p = sub.add_parser(
        "agents",
        help="the coding agents in boxes, their versions, and whether they have a key",
        description=f"List the coding agents in the server's box image ({', '.join(AGENTS)}), "
        "their versions, and whether you have set an API key for one of their providers "
        "(`paddock auth set`). Upgrade them with `paddock image build --upgrade-agents`.",
        run=cmd_agents,
        json=True,
    )


def cmd_agents(args: argparse.Namespace) -> int:
    agents = call(args, lambda c: c.list_agents())
    listing(
        agents,
        args.json,
        ["AGENT", "VERSION", "PROVIDERS", "KEY"],
        lambda a: [
            a.name,
            a.version or "-",
            ",".join(a.providers),
            "set" if a.credentials else f"missing: paddock auth set {a.providers[0]}",
        ],
    )
    for a in [] if args.json else agents:
        if a.note:
            note(f"{a.name}: {a.note}")
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    key = read_hidden(args.from_stdin, f"{args.provider} API key")
    status = call(
        args, lambda c: c.set_credential(args.provider, key, base_url=args.base_url, mode=args.mode)
    )
    where = f", {status.base_url}" if status.base_url else ""
    note(f"{status.provider}: key stored ({status.mode}{where})")
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    with client(args) as c:
        box = box_ref(args.box) if args.box else None
        uses = c.credential_log(args.provider, box=box, limit=args.limit)
    return show_uses(uses, args.json)


def cmd_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_credential(args.provider))
    note(f"{args.provider}: key removed (and detached from every box)")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    rows = call(args, lambda c: c.list_credentials())
    return listing(
        rows,
        args.json,
        ["PROVIDER", "KEY", "MODE", "BASE URL", "LAST USED"],
        lambda r: [
            r.provider,
            "set" if r.configured else "-",
            r.mode or "-",
            r.base_url or "",
            f"{r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "",
        ],
    )
