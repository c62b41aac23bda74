"""`paddock login URL` from another machine, end to end: the CLI shows a code and a link,
Debian's chromium (driven by Playwright) logs in on the server's page and approves or
denies, and the CLI receives a working token, or says why not."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..harness import Server
from .conftest import PADDOCK
from .test_accounts import PASSWORD, create_owner

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


class Login:
    """A `paddock login` running elsewhere (its own settings), waiting for approval."""

    def __init__(self, server: Server, home: Path) -> None:
        self.settings = home / "cli.json"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PADDOCK_URL", "PADDOCK_TOKEN", "PADDOCK_CONFIG")
        }
        self.env = {**env, "PADDOCK_CONFIG": str(self.settings), "HOME": str(home)}
        self.proc = subprocess.Popen(
            [PADDOCK, "login", server.url, "--web"],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        shown = ""
        while "Waiting" not in shown:
            line = self.proc.stderr.readline()
            assert line, shown
            shown += line
        found = re.search(r"open (\S+/device\?code=([A-Z]{4}-[A-Z]{4}))", shown)
        assert found, shown
        self.link, self.code = found.group(1), found.group(2)

    def finish(self) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


@pytest.fixture
def owned(make_server: type[Server]) -> Server:
    server = make_server()
    create_owner(server)
    return server


@pytest.fixture
def page() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser.new_page()
        browser.close()


def approve_in_browser(page: object, link: str, decision: str) -> str:
    page.goto(link)  # type: ignore[attr-defined]
    # Not logged in yet: the login page, which comes back to the device page.
    page.fill("#username", "ada")  # type: ignore[attr-defined]
    page.fill("#password", PASSWORD)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector(f"button[value={decision}]")  # type: ignore[attr-defined]
    text = str(page.inner_text("body"))  # type: ignore[attr-defined]
    page.click(f"button[value={decision}]")  # type: ignore[attr-defined]
    page.wait_for_selector("p.ok, p.err")  # type: ignore[attr-defined]
    return text


def test_approving_in_the_browser_logs_the_cli_in(
    owned: Server, page: object, tmp_path: Path
) -> None:
    login = Login(owned, tmp_path)
    asked = approve_in_browser(page, login.link, "approve")
    assert login.code in asked and "paddock CLI on" in asked and "ada" in asked
    code, err = login.finish()
    assert code == 0, err
    assert "logged in to" in err
    assert (login.settings.stat().st_mode & 0o777) == 0o600
    saved = json.loads(login.settings.read_text())
    assert saved["url"] == owned.url and saved["token"].startswith("pdk_")
    listed = subprocess.run(
        [PADDOCK, "ls", "--json"], env=login.env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    # The code was good for one token only.
    assert "no device is waiting" in str(page.goto(login.link) and page.inner_text("body"))  # type: ignore[attr-defined]


def test_denying_in_the_browser_saves_nothing(owned: Server, page: object, tmp_path: Path) -> None:
    login = Login(owned, tmp_path)
    approve_in_browser(page, login.link, "deny")
    code, err = login.finish()
    assert code == 1 and "denied" in err and "Traceback" not in err
    assert not login.settings.exists()


def test_an_unapproved_code_expires(owned: Server, tmp_path: Path) -> None:
    login = Login(owned, tmp_path)
    db = sqlite3.connect(owned.dir / "data" / "paddock.db")
    db.execute("UPDATE device_grants SET expires_at = ?", (time.time() - 1,))
    db.commit()
    db.close()
    code, err = login.finish()
    assert code == 1 and "expired" in err
    assert not login.settings.exists()
