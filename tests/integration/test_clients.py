"""The clients a server hands out at /clients, installed as the docs say on a "laptop" (a
clean venv, a new npm project) and run against that server: a new user's first step needs
no package registry and gets the client of the server's own version."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import ROOT, Server

pytestmark = pytest.mark.timeout(600)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_server_hands_out_clients_that_install_and_run(
    make_server: type[Server], tmp_path: Path
) -> None:
    srv = make_server()
    # Before they are built: a clear answer, not a bare 404.
    code, text = get(f"{srv.url}/clients/typescript.tgz")
    assert code == 404 and "./install.sh builds them" in text
    clients = srv.dir / "data" / "clients"
    installed = Path("/var/lib/paddock/clients")
    if installed.is_dir():
        # What install.sh built from this checkout: the script finds it up to date (it
        # builds again only when the checkout changed since), as a second install would.
        shutil.copytree(installed, clients, dirs_exist_ok=True)
    built = subprocess.run(
        [str(ROOT / "scripts" / "build-clients"), str(clients)],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "PADDOCK_PYTHON": sys.executable,
            "HOME": str(tmp_path),
        },
    )
    assert built.returncode == 0, built.stderr
    code, page = get(f"{srv.url}/clients")
    assert code == 200
    pip_line = re.search(r"pip install (\S+\.whl)", page)
    assert pip_line and f"npm install {srv.url}/clients/typescript.tgz" in page, page

    # Python: the command the page shows, into a clean venv. The dependencies come from
    # this machine's server venv (a .pth), so the test asks no package index for them.
    laptop = tmp_path / "laptop"
    subprocess.run([sys.executable, "-m", "venv", str(laptop)], check=True, timeout=120)
    pip = [str(laptop / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index"]
    done = subprocess.run([*pip, pip_line[1]], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    site = subprocess.run(
        [
            str(laptop / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    version = subprocess.run(
        [str(laptop / "bin" / "paddock"), "--version"], capture_output=True, text=True
    )
    status = subprocess.run(
        [str(laptop / "bin" / "paddock"), "status", "--json"],
        capture_output=True,
        text=True,
        env={"PADDOCK_URL": srv.url, "PADDOCK_TOKEN": srv.token, "HOME": str(tmp_path)},
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["version"] in version.stdout

    # TypeScript: `npm install URL` in a new project, then a plain .mjs as the docs show.
    project = tmp_path / "app"
    project.mkdir()
    (project / "package.json").write_text('{"name": "app", "private": true, "type": "module"}')
    npm = ["npm", "install", "--no-audit", "--no-fund", "--no-update-notifier"]
    # A registry that is nowhere: the install needs none, and must not reach one.
    dead = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    dead |= {
        "npm_config_registry": "http://127.0.0.1:9/",
        "npm_config_cache": str(tmp_path / "npm"),
    }
    done = subprocess.run(
        [*npm, f"{srv.url}/clients/typescript.tgz"],
        env=dead,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (project / "first.mjs").write_text(
        'import { Client } from "@paddock/sdk";\n'
        "const c = new Client();\n"
        "console.log((await c.status()).version);\n"
        "c.close();\n"
    )
    ran = subprocess.run(
        ["node", "first.mjs"],
        cwd=project,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "PADDOCK_URL": srv.url,
            "PADDOCK_TOKEN": srv.token,
        },
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() in version.stdout
    # Only the clients folder's own files are served.
    for name in ("..%2Fpaddock.db", "paddock.db", "x.whl"):
        assert get(f"{srv.url}/clients/{name}")[0] == 404
