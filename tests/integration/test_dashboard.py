"""The web dashboard in a real browser (Debian's chromium, driven by Playwright) against a
real paddockd with real boxes: log in, create a box from the dialog and see it run without
reloading, type in its terminal, upload and download a file, snapshot and restore, see
its desktop; a member sees only their own boxes; a hostile file name stays text."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..harness import Server
from .test_accounts import PASSWORD, create_owner
from .test_members import invite, join

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium"),
    pytest.mark.timeout(900),
]
XSS = "<img src=x onerror=alert(1)>"
BUFFER = """() => { const b = window.paddockTerminals[0].term.buffer.active; let s = "";
  for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString(true) + "\\n";
  return s; }"""
CANVAS = """() => { const c = document.querySelector('#screen canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const seen = new Set(); for (let i = 0; i < d.length; i += 4 * 97)
    seen.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); return seen.size; }"""


@pytest.fixture(scope="module")
def dash(engine: None, workdir: Path, dns_stub: Any) -> Iterator[Server]:
    """A server of its own with an owner, ada, and a member, bob."""
    server = Server(workdir / "dashboard", upstream_dns=dns_stub.address)
    try:
        create_owner(server)
        assert join(server, invite(server), "bob").status_code == 303
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def launch() -> Iterator[Any]:
    """Debian's chromium under Playwright (which never downloads a browser here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with launch() as browser:
        yield browser


def logged_in(
    chromium: Any, server: Server, username: str, width: int = 1280, height: int = 800
) -> Any:
    """A page of a fresh browser context, logged in as `username`, on the box list; it
    records alerts and script errors (`page.alerts`, `page.errors`)."""
    context = chromium.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    alerts: list[str] = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.alerts = alerts
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    page.goto(server.url + "/")
    assert "/login" in page.url  # behind the login
    page.fill("#username", username)
    page.fill("#password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#app[data-state=ready]")
    page.wait_for_selector(".live.on")  # the list is live
    return page


def sh(server: Server, box: str, script: str) -> str:
    return server.sh(box, script)


def create_in_dialog(page: Any, name: str) -> None:
    page.click("text=New box")
    page.fill("dialog input[name=name]", name)
    page.select_option("dialog select[name=ttl]", "3600")
    page.click("dialog button.primary")
    # It appears, then runs, without a reload: the server's events bring it.
    page.wait_for_selector(f"tr[data-box='{name}'] .s-running", timeout=180_000)


def test_the_owner_works_a_box_from_the_dashboard(
    dash: Server, chromium: Any, tmp_path: Path
) -> None:
    name = f"dash-{uuid.uuid4().hex[:6]}"
    page = logged_in(chromium, dash, "ada")
    try:
        create_in_dialog(page, name)
        box = dash.client().get_box(name)
        assert box.ttl == 3600 and box.owner == "ada"

        # Terminal: a real shell in the box, read back from the terminal's buffer.
        page.click(f"tr[data-box='{name}'] a")
        page.wait_for_function("() => (window.paddockTerminals || []).length > 0")
        page.wait_for_function(f"() => /[$#] $/m.test(({BUFFER})())", timeout=30_000)
        page.click(".term")
        page.keyboard.type("echo hi\n")
        page.wait_for_function(f"() => /^hi$/m.test(({BUFFER})())", timeout=20_000)
        # A dropped connection: the same shell comes back, with what it printed.
        page.keyboard.type("export MARK=kept\n")
        page.evaluate("() => window.paddockTerminals[0].ws.close()")
        page.wait_for_selector(".termstatus:has-text('reconnecting')", timeout=5000)
        page.wait_for_selector(".termstatus", state="hidden", timeout=20_000)
        page.click(".term")
        page.keyboard.type("echo mark=$MARK\n")
        page.wait_for_function(f"() => /^mark=kept$/m.test(({BUFFER})())", timeout=20_000)

        # Files: upload, find it with `paddock exec`, download it back identical.
        data = os.urandom(300_000)
        upload = tmp_path / "up.bin"
        upload.write_bytes(data)
        sh(dash, name, f"touch '/config/{XSS}'")
        page.click("#tab-files")
        page.wait_for_selector("#panel-files table.files")
        page.set_input_files("#panel-files input[type=file]:not([webkitdirectory])", str(upload))
        page.wait_for_selector("#panel-files tr[data-name='up.bin']", timeout=60_000)
        got = sh(dash, name, "sha256sum /config/up.bin | cut -d' ' -f1").strip()
        assert got == hashlib.sha256(data).hexdigest()
        with page.expect_download() as download:
            page.click("[aria-label='Download up.bin']")
        assert Path(download.value.path()).read_bytes() == data
        # A hostile name is shown as text: no element made of it, no script run.
        row = page.locator("#panel-files tr", has_text=XSS)
        assert row.count() == 1 and row.locator("img").count() == 0
        assert page.alerts == []

        # Snapshots: take one, change a file, restore, the change is gone.
        page.click("#tab-snapshots")
        page.click("#panel-snapshots >> text=Take snapshot")
        page.fill("dialog input[name=label]", "before")
        page.click("dialog button.primary")
        page.wait_for_selector("#panel-snapshots td:text-is('before')", timeout=120_000)
        sh(dash, name, "echo later > /config/later.txt")
        snap = page.locator("#panel-snapshots tr", has_text="before")
        snap.locator("button", has_text="Restore").click()
        page.click("dialog button.danger")
        page.wait_for_selector(".toast:has-text('restored')", timeout=180_000)
        assert dash.client().get_box(name).state == "running"
        assert "gone" in sh(dash, name, "test -e /config/later.txt && echo there || echo gone")

        # Desktop: started on demand, the canvas shows something.
        page.click("#tab-desktop")
        page.click("#panel-desktop >> text=Start desktop")
        page.wait_for_selector("#panel-desktop[data-desktop=connected]", timeout=120_000)
        page.wait_for_timeout(1500)
        assert page.evaluate(CANVAS) > 20, "the desktop's canvas is blank"
        assert page.alerts == [] and page.errors == []
    finally:
        page.context.close()
        with dash.client() as c:
            c.delete_box(name, force=True)


def test_a_member_sees_only_their_own_boxes(dash: Server, chromium: Any) -> None:
    mine, theirs = f"ada-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    with dash.client() as c:
        c.create_box(mine, ttl=900)
    bob = logged_in(chromium, dash, "bob")
    ada = logged_in(chromium, dash, "ada")
    try:
        create_in_dialog(bob, theirs)
        # The owner sees bob's box come up, with its owner.
        ada.wait_for_selector(f"tr[data-box='{theirs}'] td:text-is('bob')", timeout=30_000)
        ada.wait_for_selector(f"tr[data-box='{mine}']")
        # bob never sees the owner's box, nor hears of its changes.
        with dash.client() as c:
            c.stop_box(mine)
        ada.wait_for_selector(f"tr[data-box='{mine}'] .s-stopped", timeout=120_000)
        assert bob.locator(f"tr[data-box='{mine}']").count() == 0
        assert [r.get_attribute("data-box") for r in bob.locator("tr[data-box]").all()] == [theirs]
        bob.goto(f"{dash.url}/#/box/{mine}")
        bob.wait_for_selector("p.err")
        assert re.search("no box named", bob.inner_text("main"))
    finally:
        bob.context.close()
        ada.context.close()
        with dash.client() as c:
            for name in (mine, theirs):
                c.delete_box(name, force=True)
