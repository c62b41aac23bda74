"""`paddock ssh`, `ssh-config`, `ssh-proxy`, `ssh-key` and `forward`: work in a box with
OpenSSH's own tools and any editor's remote-SSH, and reach a port in a box from here.

Nothing listens for SSH anywhere. `ssh-proxy BOX` is what ssh runs as its ProxyCommand: it
opens an exec WebSocket to the box with the Paddock token (`ssh: true`), where paddockd
starts one `sshd -i` for the session, and carries the bytes both ways. The box's host key
is paddockd's record of it, pinned in a known_hosts file of the CLI's own; the CLI's key
pair (made with ssh-keygen on first use) is registered with the server as one of yours."""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._config import config_path
from ._common import UsageError, box_ref, call, client, examples, nested
from ._output import emit_json, listing, note, since

if TYPE_CHECKING:
    from .._client import Client, ExecSession

ALIAS = "paddock-{}"  # the ssh Host each box is known by


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    s = sub.add_parser(
        "ssh",
        help="an SSH session in a box (OpenSSH's ssh, through the server)",
        description="OpenSSH's ssh into the box, as the box user (or -u root), through "
        "paddockd over HTTPS like every other command: no port is open for SSH anywhere. "
        "The first run makes the CLI's key pair and registers it; the box's host key is "
        "pinned. Anything after -- runs as a command (its exit code is ssh's). For scp, "
        "rsync, sftp and editors, write the config once: `paddock ssh-config --write`.",
        epilog=examples(
            "paddock ssh current",
            "paddock ssh current -- uname -a",
            "paddock ssh -u root current -- apt-get install -y postgresql",
        ),
        run=cmd_ssh,
        box="one",
    )
    s.add_argument("-u", "--user", help="log in as this user (default: the box user, abc)")
    s.add_argument("--wake", action="store_true", help="resume the box first if it is stopped")
    s.add_argument("remote", nargs=argparse.REMAINDER, metavar="-- COMMAND")

    c = sub.add_parser(
        "ssh-config",
        help="ssh config for your boxes: ssh, scp, rsync, sftp and editors' remote-SSH",
        description="A `Host paddock-NAME` block per box (all of yours when none is named), "
        "with the ProxyCommand that reaches it, the CLI's key and a known_hosts file "
        "pinning each box's host key, kept in the CLI's folder. Printed; with --write, "
        "~/.ssh/config includes it, so `ssh paddock-NAME`, `scp`, `rsync -e ssh`, `sftp`, "
        "VS Code, Cursor, JetBrains Gateway and Zed reach the box by that name (e.g. "
        "`scp build.tar.gz paddock-NAME:/config/`, `code --remote ssh-remote+paddock-NAME "
        "/config/project`). A box made again under an old name has a new host key: run "
        "this again for it.",
        epilog=examples("paddock ssh-config --write", "paddock ssh-config current"),
        run=cmd_config,
        box="any",
    )
    c.add_argument("--write", action="store_true", help="include it from ~/.ssh/config")

    p = sub.add_parser(
        "ssh-proxy",
        help="what ssh runs to reach a box (ProxyCommand); not for people",
        description="Carries one SSH connection between stdin/stdout and the box's sshd, "
        "over the API with your token. `paddock ssh-config` writes it into the config.",
        run=cmd_proxy,
        box="one",
    )
    p.add_argument("--wake", action="store_true", help="resume the box first if it is stopped")

    k = sub.add_parser(
        "ssh-key",
        help="the public keys that may log in to your boxes over SSH",
        description="Public keys of yours that may log in to your boxes over `paddock ssh` "
        "(the CLI registers its own). A session also needs your Paddock token: a key alone "
        "reaches nothing.",
        epilog=examples(
            "paddock ssh-key add ~/.ssh/id_ed25519.pub --name laptop",
            "paddock ssh-key ls",
            "paddock ssh-key rm laptop",
        ),
    )
    key = nested(k)
    a = key.add_parser(
        "add", help="register a public key", description="Register one.", run=cmd_key_add, json=True
    )
    a.add_argument("file", nargs="?", metavar="PUBKEY", help="default: ~/.ssh/id_ed25519.pub")
    a.add_argument("--name", help="what to call it (default: its comment, else the file name)")
    key.add_parser(
        "ls", help="your keys", description="Your registered keys.", run=cmd_key_ls, json=True
    )
    rm = key.add_parser(
        "rm", help="remove a key", description="Remove a registered key.", run=cmd_key_rm
    )
    rm.add_argument("name", metavar="NAME")

    f = sub.add_parser(
        "forward",
        help="reach a port in a box from a local port (no SSH needed)",
        description="Listen on 127.0.0.1:LOCAL here and carry each connection to PORT on "
        "the box's own loopback, over the API with your token (like kubectl port-forward): "
        "for a dev server or a database. LOCAL defaults to PORT. Ctrl-C ends it.",
        epilog=examples(
            "paddock forward current 5432",
            "paddock forward current 8080:3000 9229",
        ),
        run=cmd_forward,
        box="one",
    )
    f.add_argument("ports", nargs="+", metavar="[LOCAL:]PORT")


# -- the CLI's files: its key pair, the pinned host keys, the config ----------------------
@dataclass(frozen=True)
class Files:
    folder: Path

    @property
    def key(self) -> Path:
        return self.folder / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.folder / "known_hosts"

    @property
    def config(self) -> Path:
        return self.folder / "config"


def files() -> Files:
    folder = Path(config_path()).parent / "ssh"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Files(folder)


def _ssh_tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise UsageError(f"`{name}` is not installed here: install OpenSSH's client first")
    return found


def fingerprint(line: str) -> str:
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def own_key(c: Client, f: Files) -> None:
    """The CLI's key pair (made once), registered with the server as the caller's."""
    if not f.key.exists():
        comment = f"paddock-cli@{socket.gethostname()}"
        keygen = _ssh_tool("ssh-keygen")
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(f.key)],
            check=True,
            stdin=subprocess.DEVNULL,
        )
    pub = f.key.with_suffix(".pub")
    if not pub.exists():  # the private half alone: its public half again
        said = subprocess.run(
            [_ssh_tool("ssh-keygen"), "-y", "-f", str(f.key)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if said.returncode != 0:
            raise UsageError(f"{f.key} is not a usable key ({said.stderr.strip()}): remove it")
        pub.write_text(said.stdout)
    public = pub.read_text().strip()
    if any(k.fingerprint == fingerprint(public) for k in c.list_ssh_keys()):
        return
    base = re.sub(r"[^A-Za-z0-9._@-]", "-", f"cli-{socket.gethostname()}")[:56]
    taken = {k.name for k in c.list_ssh_keys()}
    name = next(n for n in (base, *(f"{base}-{i}" for i in range(2, 99))) if n not in taken)
    c.add_ssh_key(name, public)
    note(f"registered this CLI's SSH key as {name!r} (paddock ssh-key ls)")


def _blocks(text: str) -> dict[str, str]:
    """The config's `Host` blocks, by host."""
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=Host )", text.strip()):
        if block.startswith("Host "):
            found[block.split()[1]] = block.strip() + "\n"
    return found


def _proxy_command(name: str) -> str:
    # The paddock that is running (a venv's), else the one on the PATH.
    ran = os.path.abspath(sys.argv[0])
    me = ran if os.path.basename(ran) == "paddock" else shutil.which("paddock") or ran
    words = [me, "ssh-proxy", name]
    if "PADDOCK_CONFIG" in os.environ:  # ssh's children may not have this shell's variables
        words = ["env", f"PADDOCK_CONFIG={os.environ['PADDOCK_CONFIG']}", *words]
    return " ".join(shlex.quote(w) for w in words).replace("%", "%%")


def pin(c: Client, f: Files, names: list[str]) -> None:
    """Each box's host key in known_hosts and its block in the config (others kept)."""
    hosts = {ALIAS.format(n): c.box_ssh_host_key(n) for n in names}
    kept = [
        line
        for line in (f.known_hosts.read_text().splitlines() if f.known_hosts.exists() else [])
        if line.split(" ", 1)[0] not in hosts
    ]
    lines = kept + [f"{alias} {hk.host_key}" for alias, hk in hosts.items()]
    f.known_hosts.write_text("".join(f"{line}\n" for line in lines))
    blocks = _blocks(f.config.read_text()) if f.config.exists() else {}
    for name, (alias, hk) in zip(names, hosts.items(), strict=True):
        blocks[alias] = "\n".join(
            [
                f"Host {alias}",
                f"  HostName {alias}",
                f"  User {hk.user}",
                f"  ProxyCommand {_proxy_command(name)}",
                f"  IdentityFile {shlex.quote(str(f.key))}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {shlex.quote(str(f.known_hosts))}",
                f"  HostKeyAlias {alias}",
                "  StrictHostKeyChecking yes",
                "  ForwardAgent no",
                "  ServerAliveInterval 30",
                "",
            ]
        )
    f.config.write_text("\n".join(blocks[h] for h in sorted(blocks)))


def _include(f: Files) -> bool:
    """~/.ssh/config includes the CLI's (first, as Include must come before any Host)."""
    user = Path.home() / ".ssh" / "config"
    line = f"Include {shlex.quote(str(f.config))}"
    text = user.read_text() if user.exists() else ""
    if line in text.splitlines():
        return False
    user.parent.mkdir(mode=0o700, exist_ok=True)
    user.write_text(f"# paddock ssh-config\n{line}\n\n{text}")
    user.chmod(0o600)
    return True


# -- commands -----------------------------------------------------------------------------
def cmd_config(args: argparse.Namespace) -> int:
    f = files()
    with client(args) as c:
        names = [c.get_box(box_ref(b)).name for b in args.boxes] or [
            b.name for b in c.list_boxes() if b.mine
        ]
        own_key(c, f)
        pin(c, f, names)
    if args.write:
        if _include(f):
            note(f"~/.ssh/config now includes {f.config}")
        note(f"ssh config for {len(names)} box(es): ssh {ALIAS.format('NAME')}")
    else:
        sys.stdout.write(f.config.read_text())
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    ssh = _ssh_tool("ssh")
    command = args.remote[1:] if args.remote[:1] == ["--"] else args.remote
    f = files()
    with client(args) as c:
        box = c.get_box(box_ref(args.box))
        if args.wake and box.state != "running":
            box = c.resume_box(box.name)
        own_key(c, f)
        pin(c, f, [box.name])
    argv = [ssh, "-F", str(f.config)]
    if args.user:
        argv += ["-l", args.user]
    if not command and sys.stdin.isatty():
        argv.append("-t")
    argv.append(ALIAS.format(box.name))
    if command:
        argv += ["--", *command]
    sys.stdout.flush()
    os.execv(ssh, argv)
    return 0  # not reached


def _relay(session: ExecSession, read: int, write: int) -> None:
    """Bytes from the file descriptor `read` into the session, and the session's stdout
    to `write`, until either side ends."""

    def pump_in() -> None:
        with contextlib.suppress(Exception):  # the session ended under it: nothing to say
            while chunk := os.read(read, 1 << 16):
                session.send(chunk)
            session.close_stdin()

    threading.Thread(target=pump_in, daemon=True).start()
    for kind, data in session:
        if kind == "stdout":
            os.write(write, data)
        else:
            sys.stderr.buffer.write(data)
            sys.stderr.flush()


def cmd_proxy(args: argparse.Namespace) -> int:
    with client(args) as c:
        session = c.exec_session(box_ref(args.box), ["sshd"], ssh=True, wake=args.wake)
        try:
            _relay(session, sys.stdin.fileno(), sys.stdout.fileno())
        finally:
            session.close()
    return 0


def _ports(words: list[str]) -> list[tuple[int, int]]:
    found = []
    for word in words:
        local, _, remote = word.rpartition(":")
        try:
            pair = (int(local or remote), int(remote))
        except ValueError:
            raise UsageError(f"{word!r}: give [LOCAL:]PORT, e.g. 8080 or 8080:3000") from None
        if not all(0 < p < 65536 for p in pair):
            raise UsageError(f"{word!r}: ports are 1 to 65535")
        found.append(pair)
    return found


def cmd_forward(args: argparse.Namespace) -> int:
    pairs = _ports(args.ports)
    with client(args) as c:
        box = c.get_box(box_ref(args.box)).name
        listeners = []
        for local, remote in pairs:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", local))
            except OSError as exc:
                raise UsageError(f"cannot listen on 127.0.0.1:{local}: {exc.strerror}") from None
            sock.listen(16)
            listeners.append((sock, remote))
            note(f"forwarding 127.0.0.1:{local} -> {box}:{remote} (Ctrl-C to stop)")

        def serve(conn: socket.socket, remote: int) -> None:
            with conn:
                try:
                    argv = ["nc", "-N", "127.0.0.1", str(remote)]
                    session = c.exec_session(box, argv)
                except Exception as exc:  # told; the next connection tries again
                    note(f"{box}:{remote}: {exc}")
                    return
                try:
                    _relay(session, conn.fileno(), conn.fileno())
                finally:
                    session.close()

        def accept(sock: socket.socket, remote: int) -> None:
            while True:
                conn, _ = sock.accept()
                threading.Thread(target=serve, args=(conn, remote), daemon=True).start()

        for sock, remote in listeners:
            threading.Thread(target=accept, args=(sock, remote), daemon=True).start()
        threading.Event().wait()
    return 0


def cmd_key_add(args: argparse.Namespace) -> int:
    path = Path(args.file or Path.home() / ".ssh" / "id_ed25519.pub").expanduser()
    if not path.exists():
        raise UsageError(f"no public key at {path} (make one: ssh-keygen -t ed25519)")
    text = path.read_text(errors="replace").strip()
    parts = text.split()
    name = args.name or (parts[2] if len(parts) > 2 else path.stem)
    name = re.sub(r"[^A-Za-z0-9._@-]", "-", name)[:64].lstrip("._@-") or "key"
    added = call(args, lambda c: c.add_ssh_key(name, text))
    if args.json:
        emit_json(added)
    else:
        note(f"{added.name}: {added.fingerprint} may now log in to your boxes")
    return 0


def cmd_key_ls(args: argparse.Namespace) -> int:
    keys = call(args, lambda c: c.list_ssh_keys())
    return listing(
        keys,
        args.json,
        ["NAME", "TYPE", "FINGERPRINT", "ADDED"],
        lambda k: [k.name, k.type, k.fingerprint, since(k.created_at)],
        "no SSH keys yet: `paddock ssh-key add` (paddock ssh registers the CLI's own)",
    )


def cmd_key_rm(args: argparse.Namespace) -> int:
    call(args, lambda c: c.delete_ssh_key(args.name))
    note(f"{args.name}: removed")
    return 0
