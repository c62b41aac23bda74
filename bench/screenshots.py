"""Screenshots of every dashboard page for docs/dashboard.md, taken of a real paddockd with
real boxes (docs/img/dashboard-*.png):

    /opt/paddock/venv/bin/python -m bench.screenshots
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
        server.sh(box, "mkdir -p project && cd project && git init -q && echo '# demo' > README.md")
        with server.client() as c:
            c.snapshot_box(box, label="before-upgrade")
            c.stop_box(names[2])
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
            shoot(page, tab)
        page.click("#tab-desktop")
        page.click("#panel-desktop >> text=Start desktop")
        page.wait_for_selector("#panel-desktop[data-desktop=connected]", timeout=120_000)
        page.wait_for_timeout(2000)
        shoot(page, "desktop")
        for section in ("drives", "credentials", "tokens", "members", "server"):
            page.goto(f"{server.url}/#/{section}")
            page.wait_for_selector("main .listing > *")
            shoot(page, section)
        phone = log_in(browser, server, width=390, height=844)
        phone.wait_for_selector(f"tr[data-box='{box}']")
        shoot(phone, "phone-boxes")
        phone.goto(f"{server.url}/#/box/{box}/terminal")
        phone.wait_for_selector(".termstatus", state="hidden", timeout=30_000)
        shoot(phone, "phone-terminal")


if __name__ == "__main__":
    main()
