"""Commands about the server: login, status, image build."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .._config import ClientConfig
from ._common import UsageError, client, examples, nested
from ._output import binary_size, emit_json, note

if TYPE_CHECKING:
    from ..wire.models import Capacity, PoolStatus


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "login",
        help="point the CLI at a Paddock server",
        description="Log in to a Paddock server and save its URL and an API token (file mode "
        "0600). By default in a browser: the CLI shows a code and a link, you approve it "
        "where you are logged in to the server, and the CLI receives a token of yours. "
        "Scripts and CI pass a token instead (--token-stdin, or PADDOCK_TOKEN).",
        epilog=examples(
            "paddock login https://paddock.example.com",
            "paddock login http://127.0.0.1:7423 --token-stdin < token.txt",
        ),
        run=cmd_login,
    )
    p.add_argument("server_url", metavar="URL", help="e.g. https://paddock.example.com")
    p.add_argument("--token-stdin", action="store_true", help="read the token from stdin")
    p.add_argument(
        "--with-token", action="store_true", help="ask for a token at a prompt, not in a browser"
    )
    p.add_argument(
        "--web",
        action="store_true",
        help="log in in a browser even without a terminal (print the link, wait for approval)",
    )

    p = sub.add_parser(
        "status",
        help="server, engine, runtime profile and capacity",
        description="The server's version, its box engine and runtime profile, the box image, "
        "box counts, and capacity used and left. Exits 1 when the engine is down.",
        run=cmd_status,
        json=True,
    )

    p = sub.add_parser(
        "image",
        help="the box image",
        description="The image every box starts from, built on the server.",
    )
    image = nested(p)
    b = image.add_parser(
        "build", help="build (or refresh) the box image on the server", run=cmd_image_build
    )
    b.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    b.add_argument("--rebuild-base", action="store_true", help="make a fresh base with mmdebstrap")
    b.add_argument(
        "--upgrade-agents",
        action="store_true",
        help="move the coding agents (Claude Code, Codex, ...) to their latest versions",
    )
    b.add_argument("-q", "--quiet", action="store_true", help="print only the result")


def _token(from_stdin: bool) -> str:
    """The token from stdin, PADDOCK_TOKEN, or a hidden prompt; never the command line."""
    if from_stdin:
        token = sys.stdin.readline().strip()
    elif os.environ.get("PADDOCK_TOKEN"):
        token = os.environ["PADDOCK_TOKEN"].strip()
    elif not sys.stdin.isatty():
        raise UsageError(
            "no terminal to ask for the token on: pipe it in with "
            "`paddock login URL --token-stdin`, set PADDOCK_TOKEN, or log in in a browser "
            "with `paddock login URL --web`"
        )
    else:
        import getpass

        token = getpass.getpass("API token: ").strip()
    if not token:
        raise UsageError("the token is empty (on the server: `sudo paddockd token create`)")
    return token


def _device_login(url: str) -> str:
    """A token approved in a browser (the server's /device page)."""
    import socket
    import time

    from .. import Client, PaddockError

    with Client(url=url, token="") as c:
        started = c.device_code(client=f"paddock CLI on {socket.gethostname()}")
        note(
            f"To log in, open {started.verification_uri_complete}\n"
            f"(or {started.verification_uri} and enter the code {started.user_code}),\n"
            "where you are logged in to the server, and approve. Waiting..."
        )
        deadline = time.monotonic() + started.expires_in
        while time.monotonic() < deadline:
            time.sleep(started.interval)
            answer = c.device_token(started.device_code)
            if answer.status == "approved" and answer.token:
                return answer.token
            if answer.status == "denied":
                raise PaddockError("the login was denied in the browser; nothing was saved")
            if answer.status == "expired":
                break
    raise PaddockError("the code expired before it was approved; run `paddock login` again")


def cmd_login(args: argparse.Namespace) -> int:
    from .. import Client

    url = args.server_url.rstrip("/")
    browser = args.web or (sys.stdin.isatty() and not (args.token_stdin or args.with_token))
    if browser and not os.environ.get("PADDOCK_TOKEN"):
        token = _device_login(url)
    else:
        # Without a terminal nobody may be there to approve: a script says how it logs in
        # (as `gh auth login` asks for --with-token or --web).
        token = _token(args.token_stdin)
    with Client(url=url, token=token) as c:
        status = c.status()
    cfg = ClientConfig.load(apply_env=False)
    cfg.url, cfg.token = url, token
    path = cfg.save()
    note(f"logged in to {url} (paddockd {status.version}); settings saved in {path}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with client(args) as c:
        st = c.status()
        url = c.url
    if args.json:
        emit_json(st)
        return 0
    e, cap = st.engine, st.capacity
    engine = (
        f"running (Docker {e.version}, profile {e.profile})" if e.reachable else f"DOWN: {e.error}"
    )
    print(f"server:    {url} (paddockd {st.version})")
    print(f"engine:    {engine}")
    image = "present" if e.image_present else "missing: run `paddock image build`"
    if e.image_pending:
        image = "present; a newer one is pending: run `paddock image build`"
    print(f"image:     {e.image} ({image})")
    print(f"boxes:     {st.boxes_running} running, {st.boxes_stopped} stopped")
    for line in capacity_lines(cap):
        print(line)
    if st.data_root_free_bytes is not None and st.data_root_total_bytes:
        free, total = st.data_root_free_bytes, st.data_root_total_bytes
        print(
            f"disk:      {binary_size(free)} free of {binary_size(total)} "
            f"({100 * free / total:.0f}%) at {st.data_root}"
        )
    if st.disk_limits:
        print(f"disk size: {st.disk_limits}")
    if st.pool is not None:
        print(f"pool:      {_pool_line(st.pool)}")
    if st.snapshots is not None:
        how = (
            "copies of each box's disk (copy-on-write, milliseconds)"
            if st.snapshots == "copy"
            else "engine commits (they copy every changed byte)"
        )
        print(f"snapshots: {how}")
    for problem in st.problems:
        print(f"problem:   {problem}")
    return 0 if e.reachable else 1


def _pool_line(pool: PoolStatus) -> str:
    if not pool.max_boxes or not pool.types:
        return "off"
    ready = ", ".join(
        f"{t.ready}/{t.size} {t.type}" + (f" (+{t.making} starting)" if t.making else "")
        for t in pool.types
    )
    line = f"{ready} ready, holding CPU {pool.cpus:g} and {pool.memory_mb} MiB"
    return f"{line}; {pool.note}" if pool.note else line


def cmd_image_build(args: argparse.Namespace) -> int:
    with client(args) as c:
        events = c.build_image(
            no_cache=args.no_cache,
            rebuild_base=args.rebuild_base,
            upgrade_agents=args.upgrade_agents,
        )
        for event in events:
            if event.get("done"):
                note(f"image {event['image']} ready in {event['seconds']}s")
            elif not args.quiet and "line" in event:
                sys.stderr.write(f"[{event['step']}] {event['line']}")
                sys.stderr.flush()
    return 0


def capacity_lines(cap: Capacity) -> list[str]:
    """What running boxes claim, and of what: memory first (what limits a server)."""
    how = (
        f"{cap.memory_overcommit:g}x the host's memory after a {cap.memory_reserve_mb} MiB reserve"
        if cap.memory_overcommit
        else "set by hand"
    )
    lines = [f"capacity:  memory {cap.memory_used_mb}/{cap.memory_total_mb} MiB claimed ({how})"]
    if cap.cpus_total is None:
        lines.append(f"           CPU {cap.cpus_used:g} claimed, shared by weight (not counted)")
    else:
        lines.append(f"           CPU {cap.cpus_used:g}/{cap.cpus_total:g} claimed")
    if cap.memory_available_mb is not None:
        kept = (
            f" (a box starts while more than the {cap.memory_reserve_mb} MiB reserve is)"
            if cap.memory_reserve_mb
            else ""
        )
        lines.append(f"           host memory available: {cap.memory_available_mb} MiB{kept}")
    return lines
