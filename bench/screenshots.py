"""Screenshots of every dashboard page for docs/dashboard.md, taken of a real paddockd with
real boxes (docs/img/dashboard-*.png), each page with something on it: a project, a drive,
a preview, a member, a key, a snapshot, an allowlist and what it refused.

    /opt/paddock/venv/bin/python -m bench.screenshots

Nothing leaves the machine: the names the box looks up are not on its allowlist, so
paddockd's own resolver refuses them (they are never forwarded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.test_members import invite, join

from ._dashboard import chromium, log_in, make_boxes, owned_server

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def shoot(page: Any, name: str) -> None:
    page.wait_for_timeout(600)  # the last event or stats round in
    page.screenshot(path=str(IMG / f"dashboard-{name}.png"))
    print("docs/img/dashboard-" + name + ".png")


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    with owned_server() as server, chromium() as browser:
        names = make_boxes(server, "demo", 3)
        box = names[0]
        server.sh(
            box,
            "mkdir -p project/src && cd project && git init -q && echo '# demo' > README.md && "
            "printf 'print(\"hi\")\\n' > src/app.py && head -c 300000 /dev/urandom > data.bin",
        )
        server.sh(box, "cd project && (setsid python3 -m http.server 8000 >/dev/null 2>&1 &)")
        assert join(server, invite(server), "bob").status_code == 303
        with server.client() as c:
            c.snapshot_box(box, label="before-upgrade")
            c.stop_box(names[2])
            c.create_drive("datasets")
            c.create_preview(box, 8000)
            c.set_credential("anthropic", "sk-ant-demo-not-a-real-key")
            c.set_network(box, "allowlist", ["pypi.org", "*.github.com", "198.18.0.0/15"])
        # Names off the allowlist: refused by paddockd's resolver, and logged.
        server.sh(box, "for n in example.com tracker.example.net; do getent hosts $n; done; true")
        page = log_in(browser, server)
        page.wait_for_selector(f"tr[data-box='{box}'] .s-running")
        shoot(page, "boxes")
        page.click("text=New box")
        page.wait_for_selector("dialog button.primary")
        shoot(page, "new-box")
        page.click("dialog >> text=Cancel")
        page.goto(f"{server.url}/#/box/{box}/terminal")
        page.wait_for_selector(".termstatus", state="hidden", timeout=30_000)
        page.click(".term")
        page.keyboard.type("cd project && ls -la && uname -a\n")
        shoot(page, "terminal")
        for tab in ("files", "snapshots", "network", "agents", "previews", "details"):
            page.click(f"#tab-{tab}")
            page.wait_for_selector(f"#panel-{tab} > *")
            if tab == "network":
                page.wait_for_selector("#panel-network table.egress tbody tr")
            shoot(page, tab)
        page.click("#tab-desktop")
        page.click("#panel-desktop >> text=Start desktop")
        page.wait_for_selector("#panel-desktop[data-desktop=connected]", timeout=120_000)
        page.wait_for_timeout(2000)
        shoot(page, "desktop")
        for section, shot in (
            ("drives", "drives"),
            ("previews", "all-previews"),
            ("credentials", "credentials"),
            ("tokens", "tokens"),
            ("members", "members"),
            ("server", "server"),
        ):
            page.goto(f"{server.url}/#/{section}")
            page.wait_for_selector("main .listing > *")
            shoot(page, shot)
        phone = log_in(browser, server, width=390, height=844)
        phone.wait_for_selector(f"tr[data-box='{box}']")
        shoot(phone, "phone-boxes")
        phone.goto(f"{server.url}/#/box/{box}/terminal")
        phone.wait_for_selector(".termstatus", state="hidden", timeout=30_000)
        shoot(phone, "phone-terminal")


if __name__ == "__main__":
    main()
