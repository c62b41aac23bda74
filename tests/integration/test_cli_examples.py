"""Every example in a `--help` epilog, run as a reader would paste it, against a live
server with `current` a box of this module's (each parses in tests/unit/cli too). An
example that cannot run here says why below; a new example runs without anyone listing
it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock import NotFound

from ..cli_commands import examples
from .conftest import PADDOCK, ROOT, Server

# Examples that need what a test machine has not: they only parse (tests/unit/cli).
NOT_RUN = {
    # Export and import round trips run in tests/integration/test_portable.py.
    "paddock export api-tests -o api-tests.paddock": "a box named api-tests",
    "paddock export api-tests:before-upgrade -o before.paddock": "a box with that snapshot",
    "paddock import api-tests.paddock": "an exported box file",
    "paddock import before.paddock --name api-tests-before --type large": "a box file",
    "paddock auth set anthropic": "asks for the key on a terminal",
    "paddock auth set openai --base-url http://10.0.0.5:8000/v1": "asks on a terminal",
    "paddock auth set openrouter --mode env": "asks on a terminal",
    "paddock secret set GITHUB_TOKEN --host api.github.com --host github.com": "a terminal",
    "paddock secret set API_KEY --host api.example.com --header X-Api-Key": "a terminal",
    "paddock prompt current 'add a test for the parser and make it pass'": "a model provider",
    "paddock prompt current --agent codex --workdir /config/project < task.md": "a model",
    "paddock prompt current --detach 'upgrade the dependencies'": "a model provider",
    # A login replaces the CLI's server; the device login waits for a person in a browser.
    "paddock login https://paddock.example.com": "a person approving it in a browser",
    "paddock login http://127.0.0.1:7423 --token-stdin < token.txt": "a token of the machine's server",
    "paddock ssh -u root current -- apt-get install -y postgresql": "a package archive",
    "paddock ssh-key add ~/.ssh/id_ed25519.pub --name laptop": "a key pair in ~/.ssh",
    "paddock ssh-key rm laptop": "the key the example before registers",
    "paddock forward current 5432": "runs until Ctrl-C (tests/integration/test_ssh.py)",
    "paddock forward current 8080:3000 9229": "runs until Ctrl-C",
    # Members exist only where someone accepted an invitation (tests/integration/test_members).
    "paddock members limits ana --max-boxes 3 --max-memory 8g": "a member account",
    "paddock members limits ana --max-cpus none": "a member account",
}
# What the box needs before an example (run in it as root).
BEFORE = {
    # suggest needs an egress log: a name the allowlist of the examples before allows.
    "paddock network current allow $(paddock network suggest current)": "getent hosts pypi.org || true",
}
# Stand-ins for programs on a reader's machine that this one may lack.
PREAMBLE = "display() { cat >/dev/null; }\n"


@pytest.fixture(scope="module")
def current(server: Server) -> Iterator[str]:
    """The box the examples call `current`, with the project the README's walkthrough puts
    there (and a build's output to pull)."""
    name = f"ex-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--ttl", "1800", check=True)
    server.cli("push", name, str(ROOT / "examples" / "node-pass"), "--to", "/config/project")
    server.sh(name, "mkdir -p /config/project/dist && echo built > /config/project/dist/app.js")
    with server.client() as c:
        c.set_credential("anthropic", "sk-ant-example")  # what `auth attach` examples attach
        c.set_secret("GITHUB_TOKEN", ["api.github.com"], "ghp_example")  # `secret attach`'s
    yield name
    with server.client() as c:
        for provider in ("anthropic", "openai"):  # openai: set by an example, if it ran
            with contextlib.suppress(NotFound):
                c.delete_credential(provider)
        for secret in ("GITHUB_TOKEN", "NPM_TOKEN"):
            with contextlib.suppress(NotFound):
                c.delete_secret(secret)
        for template in c.list_templates():  # what `template` examples made
            c.delete_template(template.name)
    server.cli("rm", "--force", name)


@pytest.mark.parametrize(("command", "line"), examples(), ids=[line for _, line in examples()])
def test_example_runs(
    server: Server, current: str, tmp_path: Path, command: str, line: str
) -> None:
    if line in NOT_RUN:
        pytest.skip(f"needs {NOT_RUN[line]}; it parses in tests/unit/cli")
    if line in BEFORE:
        server.sh(current, BEFORE[line], user="root")
    # A reader's folder: something to push, nothing in the way of a pull.
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / "t").write_text("npm_example_token\n")  # a token file to read a secret from
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hi')\n")
    (tmp_path / "home").mkdir()
    # A project's Dockerfile (`template build`), at the top and where -f names one.
    (tmp_path / "docker").mkdir()
    for dockerfile in (tmp_path / "Dockerfile", tmp_path / "docker" / "Dockerfile"):
        dockerfile.write_text(
            "FROM paddock-box\nCOPY src/main.py /opt/tools/\nENV TOOLS=/opt/tools\n"
        )
    settings = tmp_path / "cli.json"
    settings.write_text(json.dumps({"url": server.url, "token": server.token, "current": current}))
    env = {
        **server.env,
        "PADDOCK_CONFIG": str(settings),
        "HOME": str(tmp_path / "home"),  # `skill install` writes under it
        "PATH": f"{Path(PADDOCK).parent}:/usr/bin:/bin",
        "OPENAI_API_KEY": "sk-example",
    }
    env.pop("DISPLAY", None)  # `paddock desktop` prints the link instead of opening it
    with server.client() as c:
        before = {b.id for b in c.list_boxes()}
    try:
        done = subprocess.run(
            ["bash", "-c", PREAMBLE + "set -o pipefail\n" + line],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        with server.client() as c:
            for box in c.list_boxes():
                if box.id not in before:  # `paddock new` examples
                    c.delete_box(box.id, force=True)
            # `settings` examples change the server every later test shares: undone at
            # once, types last (a default type may name one).
            changed = [s.key for s in c.settings() if s.source == "set"]
            for key in sorted(changed, key=lambda k: k.startswith("types.")):
                c.reset_setting(key)
    assert done.returncode == 0, f"`paddock {command} --help` shows: {line}\n{done.stderr}"
    assert "Traceback" not in done.stderr
