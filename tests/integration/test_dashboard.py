"""The web dashboard in a real browser (Debian's chromium, driven by Playwright) against a
real paddockd with real boxes: log in, create a box from the dialog and see it run without
reloading, type in its terminal, upload and download a file and a folder, snapshot and
restore, see its desktop; edit the network policy (checked as typed, the suggested
allowlist) and watch a refused connection appear in the live egress log; run an agent
against the fake model, watch it, stop one, read past runs; the Server page; a member sees
only their own boxes; a hostile file name stays text."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..harness import Server
from ..netlab import ALLOWED, OTHER, TestInternet
from .test_accounts import PASSWORD, create_owner
from .test_agents import BASE_URL, FakeModel
from .test_members import invite, join
from .test_network import connect, lookup

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
    # Types in the CLI's units: "small — 1 CPU, 1 GiB", never "1.1 GB".
    page.wait_for_selector("dialog select[name=type] option", state="attached")
    options = page.locator("dialog select[name=type] option").all_text_contents()
    assert any(o.endswith(", 1 GiB") for o in options), options
    assert not any("GB" in o for o in options), options
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
        # A folder comes as a zip of what stays inside it: the links that lead out of it
        # (to the box's /etc, above the folder) are left out, the rest is as in the box.
        sh(
            dash,
            name,
            "mkdir -p /config/proj/src/deep && cd /config/proj && "
            "head -c 200000 /dev/urandom > src/deep/blob && echo '# readme' > README.md && "
            "ln -s ../README.md src/readme && ln -s /etc/passwd passwd && ln -s ../.. up",
        )
        page.click("#panel-files >> text=Refresh")
        with page.expect_download() as download:
            page.click("[aria-label='Download proj']")
        assert download.value.suggested_filename == "proj.zip"
        zipped = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
        assert sorted(zipped.namelist()) == [
            "proj/",
            "proj/README.md",
            "proj/src/",
            "proj/src/deep/",
            "proj/src/deep/blob",
            "proj/src/readme",
        ]
        for member in ("README.md", "src/deep/blob"):
            there = sh(dash, name, f"sha256sum /config/proj/{member} | cut -d' ' -f1").strip()
            assert hashlib.sha256(zipped.read(f"proj/{member}")).hexdigest() == there
        link = zipped.getinfo("proj/src/readme")
        assert stat.S_ISLNK(link.external_attr >> 16) and zipped.read(link) == b"../README.md"
        # A hostile name is shown as text: no element made of it, no script run.
        row = page.locator("#panel-files tr", has_text=XSS)
        assert row.count() == 1 and row.locator("img").count() == 0
        assert page.alerts == []

        # A text file opens in an editor, and is saved back (its mode kept); an image is
        # shown; the folder is in the URL, so a reload stays in it.
        sh(
            dash,
            name,
            "printf 'echo one\\n' > /config/proj/run.sh && chmod 755 /config/proj/run.sh",
        )
        sh(
            dash,
            name,
            'python3 -c "import base64,sys; sys.stdout.buffer.write(base64.b64decode('
            "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='))\" "
            "> /config/proj/dot.png",
        )
        page.click("#panel-files button.link:text-is('proj/')")
        page.wait_for_selector("#panel-files tr[data-name='run.sh']")
        assert page.url.endswith(f"#/box/{name}/files/config/proj")
        page.click("[aria-label='Open run.sh']")
        editor = page.locator("dialog textarea.editor")
        assert editor.input_value() == "echo one\n"
        editor.fill("echo two\n")
        page.click("dialog button.primary:text-is('Save')")
        page.wait_for_selector(".toast:has-text('saved run.sh')")
        assert (
            sh(dash, name, "cat /config/proj/run.sh; stat -c %a /config/proj/run.sh")
            == "echo two\n755\n"
        )
        page.click("[aria-label='Open dot.png']")
        page.wait_for_function(
            "() => document.querySelector('dialog img.preview')?.naturalWidth === 1"
        )
        page.click("dialog button.primary:text-is('Close')")
        page.reload()
        page.wait_for_selector("#panel-files tr[data-name='dot.png']")
        # A file's delete does not speak of what is in it.
        page.click("[aria-label='Delete dot.png']")
        assert page.locator("dialog h2").inner_text() == "Delete /config/proj/dot.png?"
        page.click("dialog button:text-is('Cancel')")
        page.click("#panel-files button:text-is('↑ Up')")

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
        # The clipboard is folded away: the desktop starts near the top, not below the fold.
        assert page.locator("#panel-desktop details.clipboard").count() == 1
        assert page.locator("#screen").bounding_box()["y"] < 300

        # Logs: what the box's init and services wrote, as `paddock logs` shows it.
        page.click("#tab-logs")
        try:  # any answer: the lines, "Nothing yet" or an error, compared below
            page.wait_for_function(
                "() => (document.querySelector('#panel-logs pre.log')?.textContent || '') !== ''"
            )
        except Exception as exc:
            panel = page.locator("#panel-logs").inner_html()
            raise AssertionError(f"the logs tab showed nothing: {panel!r}") from exc
        shown = page.locator("#panel-logs pre.log").inner_text()
        said = dash.cli("logs", name, check=True).stdout.strip()
        assert said.splitlines()[-1] in shown if said else shown.startswith("Nothing yet")

        # Details: what the box uses, as a line over the last minutes.
        page.click("#tab-details")
        # (an idle box's line lies flat on the axis: there, not "visible" to Playwright)
        page.wait_for_selector(
            "#panel-details .spark-row[data-usage=cpu] polyline[points]", state="attached"
        )
        page.wait_for_selector(
            "#panel-details .spark-row[data-usage=memory] .spark-now:has-text('iB of ')"
        )
        # SSH: the commands, the host key to check (the server's), VS Code's link.
        with dash.client() as c:
            fingerprint = c.box_ssh_host_key(name).fingerprint
        page.wait_for_selector(f"#panel-details .ssh-fingerprint:has-text('{fingerprint}')")
        link = page.locator("#panel-details .ssh a").get_attribute("href")
        assert link == f"vscode://vscode-remote/ssh-remote+paddock-{name}/config"
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


def open_tab(page: Any, server: Server, box: str, tab: str) -> None:
    page.goto(f"{server.url}/#/box/{box}/{tab}")
    page.wait_for_selector(f"#panel-{tab} > *")


def policy(server: Server, box: str) -> tuple[str, list[str]]:
    with server.client() as c:
        spec = c.get_network(box)
    return spec.mode, list(spec.allow)


def test_the_network_tab_edits_the_policy_and_shows_refusals_live(
    dash: Server, chromium: Any, internet: TestInternet
) -> None:
    name = f"net-{uuid.uuid4().hex[:6]}"
    with dash.client() as c:
        c.create_box(name, ttl=900)
    page = logged_in(chromium, dash, "ada")
    try:
        open_tab(page, dash, name, "network")
        page.wait_for_selector("#panel-network .live:text-is('live')")
        select, area = "#panel-network select[name=network]", "#panel-network textarea[name=allow]"
        problems = "#panel-network ul.problems li"

        # The allowlist is checked as it is typed, by the server's rules; a bad one is
        # never sent.
        page.select_option(select, "allowlist")
        page.fill(area, "allowed.test\nbad_name!\n10.0.0.1/8\nhttps://github.com/")
        page.wait_for_selector(f"{problems}:has-text('bad_name!')")
        assert page.locator(problems).all_inner_texts() == [
            "bad_name!: use an IPv4 address or CIDR (10.0.0.0/8), a domain (example.com) "
            "or a wildcard (*.example.com)",
            "10.0.0.1/8: host bits are set (use the network's first address)",
            "https://github.com/: a URL, not a host: give its host name or a range (github.com)",
        ]
        # The browser's own form check stops the submit (and says why at the field).
        page.click("#panel-network button.primary")
        assert page.eval_on_selector(area, "e => e.validationMessage") == "fix the allowlist"
        page.wait_for_timeout(500)
        assert policy(dash, name) == ("allow-all", [])
        page.fill(area, "allowed.test\n*.wild.test\n198.18.2.0/24")
        page.wait_for_selector(problems, state="detached")
        page.click("#panel-network button.primary")
        page.wait_for_selector(".toast:has-text('network: allowlist (3 entries)')")
        assert policy(dash, name) == ("allowlist", ["allowed.test", "*.wild.test", "198.18.2.0/24"])

        # What the box uses shows up in the log as it happens; the suggestion covers it.
        page.select_option(select, "allow-all")
        page.click("#panel-network button.primary")
        page.wait_for_selector(".toast:has-text('network: allow-all')")
        assert lookup(dash, name, "allowed.test")[0] == [ALLOWED]
        assert connect(dash, name, OTHER)[0]
        rows = "#panel-network table.egress tbody tr"
        page.wait_for_selector(f"{rows}:has-text('allowed.test')", timeout=20_000)
        page.wait_for_selector(f"{rows}:has-text('{OTHER}:80')", timeout=20_000)
        page.click("#panel-network >> text=Apply suggested allowlist")
        page.wait_for_selector(f"dialog:has-text('Allow only: allowed.test, {OTHER}/32')")
        page.click("dialog button.danger")
        page.wait_for_selector(".toast:has-text('network: allowlist (2 entries)')")
        assert policy(dash, name) == ("allowlist", ["allowed.test", f"{OTHER}/32"])
        assert page.input_value(area) == f"allowed.test\n{OTHER}/32"

        # Deny all: a new connection is refused at once, the refusal appears in the log
        # without a reload, and the listener it was meant for saw nothing.
        page.select_option(select, "deny-all")
        page.click("#panel-network button.primary")
        page.wait_for_selector(".toast:has-text('network: deny-all')")
        assert policy(dash, name) == ("deny-all", [])
        internet.reset()
        ok, seconds, _ = connect(dash, name, OTHER)
        assert not ok and seconds < 3
        refused = page.locator(f"{rows}.refused", has_text=f"{OTHER}:80")
        refused.first.wait_for(timeout=20_000)
        assert "connect" in refused.first.inner_text()
        assert internet.connections() == []
        assert page.alerts == [] and page.errors == []
    finally:
        page.context.close()
        with dash.client() as c:
            c.delete_box(name, force=True)


def set_key(page: Any, server: Server, provider: str, key: str, base_url: str) -> None:
    """A provider key through the Credentials page (never shown again once saved)."""
    page.goto(f"{server.url}/#/credentials")
    page.click(f"[aria-label='Set key for {provider}']")
    page.fill("dialog input[name=key]", key)
    page.fill("dialog input[name=base_url]", base_url)
    page.click("dialog button.primary")
    page.wait_for_selector(f".toast:has-text('key for {provider} saved')")
    assert key not in page.content()


def test_the_agents_tab_runs_watches_stops_and_keeps_history(
    dash: Server, chromium: Any, internet: TestInternet, workdir: Path
) -> None:
    model = FakeModel(internet, workdir / "fakemodel-dashboard.jsonl")
    name = f"agents-{uuid.uuid4().hex[:6]}"
    with dash.client() as c:
        c.create_box(name, box_type="medium", ttl=1800)
    page = logged_in(chromium, dash, "ada")
    try:
        set_key(page, dash, "anthropic", f"sk-ant-fake-{uuid.uuid4().hex}", BASE_URL)
        set_key(page, dash, "openai", "sk-openai-fake-0123456789", f"{BASE_URL}/v1")
        open_tab(page, dash, name, "agents")
        panel = "#panel-agents"
        page.wait_for_selector(f"{panel} select[name=agent] option[value=claude]", state="attached")

        # A run, watched live to its end: the model's answer, then how it ended.
        page.select_option(f"{panel} select[name=agent]", "claude")
        page.fill(f"{panel} textarea[name=instruction]", "Say something.")
        page.click(f"{panel} button.primary")
        page.wait_for_selector(".toast:has-text('started')")
        log = f"{panel} pre.log"
        page.wait_for_function(
            f"() => /\\[succeeded, exit 0\\]/.test(document.querySelector('{log}').textContent)",
            timeout=240_000,
        )
        assert "FAKE-ANSWER" in page.inner_text(log)
        assert any(r["path"] for r in model.requests())
        with dash.client() as c:
            (first,) = c.list_runs(name)
        assert first.status == "succeeded" and first.agent == "claude"

        # One that waits on a model that never answers: Stop ends it.
        page.select_option(f"{panel} select[name=agent]", "codex")
        page.fill(f"{panel} textarea[name=instruction]", "SLOW please")
        page.click(f"{panel} button.primary")
        row = page.locator(f"{panel} tr", has_text="SLOW please")
        row.locator(".s-running").wait_for(timeout=60_000)
        page.wait_for_timeout(3000)  # codex is waiting on the model by now
        with dash.client() as c:
            slow = next(r for r in c.list_runs(name) if r.instruction == "SLOW please")
        assert slow.status == "running"
        row.locator("button", has_text="Stop").click()
        row.locator(".s-stopped").wait_for(timeout=60_000)
        with dash.client() as c:
            assert c.get_run(slow.id).status == "stopped"
        assert dash.cli("exec", name, "--", "pgrep", "-f", "codex exec").returncode == 1

        # History: after a reload both runs are listed; the first one's log is there.
        page.reload()
        page.wait_for_selector(f"{panel} tr:has-text('SLOW please') .s-stopped")
        page.click(f"{panel} button.link:text-is('{first.id}')")
        page.wait_for_selector(f"{panel} h2:has-text('Run log: {first.id} (claude)')")
        page.wait_for_function(
            f"() => document.querySelector('{log}').textContent.includes('FAKE-ANSWER')"
        )
        assert page.alerts == [] and page.errors == []
    finally:
        page.context.close()
        with dash.client() as c:
            c.delete_box(name, force=True)
            for provider in ("anthropic", "openai"):
                with contextlib.suppress(Exception):
                    c.delete_credential(provider)


def test_secrets_are_set_listed_and_shown_with_their_boxes(dash: Server, chromium: Any) -> None:
    """The Credentials page: a new secret (its value never shown again), the box it is
    attached to, and the box's Agents tab saying how it holds its keys and secrets."""
    name = f"sec-{uuid.uuid4().hex[:6]}"
    value = f"ghp_{uuid.uuid4().hex}"
    page = logged_in(chromium, dash, "ada")
    try:
        page.goto(f"{dash.url}/#/credentials")
        page.click("button:has-text('New secret')")
        page.fill("dialog input[name=name]", "DASH_TOKEN")
        page.fill("dialog input[name=value]", value)
        page.fill("dialog input[name=hosts]", "api.github.com, github.com")
        page.click("dialog button.primary")
        page.wait_for_selector(".toast:has-text('secret DASH_TOKEN saved')")
        row = page.locator("tr", has_text="DASH_TOKEN")
        assert "api.github.com, github.com" in row.inner_text()
        with dash.client() as c:
            c.set_credential("anthropic", "sk-ant-dash-0123456789")
            c.create_box(name, ttl=1800, secrets=["DASH_TOKEN"])
            c.attach_credential(name, "anthropic")
        page.reload()
        page.wait_for_selector(f"tr:has-text('DASH_TOKEN'):has-text('{name}')")
        assert (
            page.locator("tr", has_text="anthropic").locator("td").nth(2).inner_text() == "gateway"
        )
        open_tab(page, dash, name, "agents")
        page.wait_for_selector("#panel-agents td:has-text('gateway: a placeholder')")
        page.wait_for_selector("#panel-agents td:has-text('$DASH_TOKEN')")
        assert value not in page.content()
        assert page.alerts == [] and page.errors == []
    finally:
        page.context.close()
        with dash.client() as c:
            c.delete_box(name, force=True)
            c.delete_secret("DASH_TOKEN")
            c.delete_credential("anthropic")


def test_the_templates_page_lists_follows_and_makes_boxes(
    dash: Server, chromium: Any, tmp_path: Path
) -> None:
    """A template built with the CLI: listed, its build log shown live, a box made from it
    through the New box dialog, then deleted."""
    status = json.loads(dash.cli("status", "--json", check=True).stdout)
    if status.get("snapshots") != "copy":
        pytest.skip("templates need copy-on-write disks")
    (tmp_path / "Dockerfile").write_text(
        "FROM paddock-box\nRUN echo built-by-dockerfile > /etc/mark\n"
    )
    name = f"dash-{uuid.uuid4().hex[:4]}"
    dash.cli("template", "build", name, str(tmp_path), check=True, timeout=300)
    page = logged_in(chromium, dash, "ada")
    made = ""
    try:
        page.goto(f"{dash.url}/#/templates")
        row = page.locator("tr", has_text=name)
        row.locator(".s-ready").wait_for()
        row.locator("button", has_text="Log").click()
        page.wait_for_function(
            "() => document.querySelector('pre.log').textContent.includes('[ready:')"
        )
        assert "RUN echo built-by-dockerfile" in page.inner_text("pre.log")
        row.locator("button", has_text="New box").click()
        assert page.input_value("dialog select[name=template]") == name
        page.click("dialog button.primary")
        page.wait_for_selector(".toast:has-text('created')")
        made = page.url.rsplit("/", 1)[-1]
        assert dash.cli("exec", made, "--", "cat", "/etc/mark").stdout == "built-by-dockerfile\n"
        page.goto(f"{dash.url}/#/templates")
        page.once("dialog", lambda d: d.accept())
        page.locator("tr", has_text=name).locator("button", has_text="Delete").click()
        page.click("dialog button.danger, dialog button.primary")
        page.wait_for_selector(f".toast:has-text('template {name} deleted')")
        assert page.alerts == [] and page.errors == []
    finally:
        page.context.close()
        with dash.client() as c:
            if made:
                c.delete_box(made, force=True)
            with contextlib.suppress(Exception):
                c.delete_template(name)


def test_the_server_page_shows_status_capacity_and_disk(dash: Server, chromium: Any) -> None:
    name = f"srv-{uuid.uuid4().hex[:6]}"
    with dash.client() as c:
        c.create_box(name, ttl=900)
    ada = logged_in(chromium, dash, "ada")
    bob = logged_in(chromium, dash, "bob")
    try:
        for page in (ada, bob):
            page.goto(f"{dash.url}/#/server")
            page.wait_for_selector("main dl.details")
        with dash.client() as c:
            status = c.status()
        shown = dict(
            zip(
                ada.locator("main dl.details dt").all_inner_texts(),
                ada.locator("main dl.details dd").all_inner_texts(),
                strict=True,
            )
        )
        assert shown["Version"] == status.version
        assert shown["Engine"].startswith("reachable, Docker ")
        assert f"profile {status.engine.profile}" in shown["Engine"]
        assert shown["Box image"] == status.engine.image
        # Built by this Paddock (install.sh): the engine kept the recipe's label.
        assert status.engine.image_pending is False
        cap = status.capacity
        assert cap.cpus_total is not None  # the tests' servers count CPU
        assert shown["CPUs"] == f"{cap.cpus_used:g} of {cap.cpus_total:g} claimed"
        # One unit system, the CLI's: powers of 1024, as box types are set.
        assert re.fullmatch(
            r"\d+(\.\d)? [MG]iB of \d+(\.\d)? GiB claimed by running boxes", shown["Memory"]
        )
        assert re.fullmatch(r"\d+(\.\d)? GiB available", shown["Host memory"])
        assert re.search(r"free of \d+(\.\d)? [GT]iB$", shown["Disk"]), shown["Disk"]
        # The image rebuild is the owner's.
        assert ada.locator("text=Rebuild box image").count() == 1
        assert bob.locator("text=Rebuild box image").count() == 0
        # The list shows what a running box uses now.
        ada.goto(f"{dash.url}/#/")
        cell = f"tr[data-box='{name}'] td[data-label=Memory]"
        ada.wait_for_function(
            f'() => /^\\d+(\\.\\d)? [KMG]iB$/.test(document.querySelector("{cell}")?.textContent)',
            timeout=20_000,
        )
        assert re.fullmatch(r"\d+ running, \d+ stopped", shown["Boxes"])
        assert int(shown["Boxes"].split()[0]) >= 1
        assert shown["Disk"].startswith(f"{status.data_root}: ") and " free of " in shown["Disk"]
        if status.pool is not None:  # the warm pool, as `paddock status` says it
            assert shown["Warm pool"] == "off" or " ready, holding CPU " in shown["Warm pool"]
        assert ada.errors == [] and bob.errors == []
    finally:
        ada.context.close()
        bob.context.close()
        with dash.client() as c:
            c.delete_box(name, force=True)


def test_the_owner_changes_and_resets_a_setting_on_the_server_page(
    dash: Server, chromium: Any
) -> None:
    ada = logged_in(chromium, dash, "ada")
    bob = logged_in(chromium, dash, "bob")
    try:
        for page in (ada, bob):
            page.goto(f"{dash.url}/#/server")
            page.wait_for_selector("main dl.details")
        row = ada.locator("main tr", has_text="boxes.default_ttl")
        row.wait_for()
        ada.click("button[aria-label='Change boxes.default_ttl']")
        ada.fill("dialog input[name=value]", "45m")
        ada.click("dialog button[type=submit]")
        ada.wait_for_function(
            "() => [...document.querySelectorAll('main tr')].some((r) => "
            "r.textContent.includes('boxes.default_ttl') && r.textContent.includes('2700'))"
        )
        assert "changed (file: 3600)" in row.inner_text()
        with dash.client() as c:
            assert c.get_setting("boxes.default_ttl").value == 2700
        # A value the server cannot take is said, and nothing changes.
        ada.click("button[aria-label='Change boxes.default_ttl']")
        ada.fill("dialog input[name=value]", "soon")
        ada.click("dialog button[type=submit]")
        ada.locator(".toast", has_text="not a duration").wait_for()
        ada.click("button[aria-label='Reset boxes.default_ttl']")
        # The changed row says "3600" too ("changed (file: 3600)"): it is the 2700 that goes.
        ada.wait_for_function(
            "() => [...document.querySelectorAll('main tr')].some((r) => "
            "r.textContent.includes('boxes.default_ttl') && r.textContent.includes('3600') "
            "&& !r.textContent.includes('2700'))"
        )
        with dash.client() as c:
            assert c.get_setting("boxes.default_ttl").source == "default"
        assert bob.locator("text=boxes.default_ttl").count() == 0  # the owner's alone
        assert ada.errors == [] and bob.errors == []
    finally:
        ada.context.close()
        bob.context.close()
        with dash.client() as c:
            c.reset_setting("boxes.default_ttl")


def test_the_audit_page_shows_each_user_their_own(dash: Server, chromium: Any) -> None:
    name = f"aud-{uuid.uuid4().hex[:6]}"
    with dash.client() as c:
        c.create_box(name, ttl=900)
        c.delete_box(name, force=True)
    ada = logged_in(chromium, dash, "ada")
    bob = logged_in(chromium, dash, "bob")
    try:
        for page in (ada, bob):
            page.goto(f"{dash.url}/#/audit")
            page.wait_for_selector("main table, main p")
        # The owner sees the box's removal by the server's token; bob none of it.
        row = ada.locator("main tr", has_text=f"ref={name}").first
        row.wait_for(timeout=10_000)
        assert "DELETE /v1/boxes/{ref}" in row.inner_text() and "204 ok" in row.inner_text()
        assert bob.locator("main tr", has_text=f"ref={name}").count() == 0
        assert ada.errors == [] and bob.errors == []
    finally:
        ada.context.close()
        bob.context.close()
