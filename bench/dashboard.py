"""Dashboard benchmark: first meaningful paint of the box list with many boxes, what the
browser downloads (compressed) for all of the dashboard, and paddockd's RSS with the
dashboard open on three boxes, each with its terminal and its desktop connected. The
terminal's keystroke echo is bench/terminal.py's.

    /opt/paddock/venv/bin/python -m bench.dashboard            # 50 boxes (~3 min)
    /opt/paddock/venv/bin/python -m bench.dashboard --boxes 10

Starts a paddockd of its own (tests/harness.py) and Debian's chromium."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from ._dashboard import chromium, log_in, make_boxes, owned_server
from ._table import Row, print_table

ASSETS = Path(__file__).resolve().parents[1] / "src" / "paddockd" / "dashboard" / "assets"
# Resource Timing: what came over the network for scripts and styles (compressed).
TRANSFERRED = """() => performance.getEntriesByType("resource")
  .filter((r) => /\\.(js|css)$/.test(new URL(r.name).pathname))
  .reduce((n, r) => n + r.transferSize, 0)"""


def first_paint(browser: Any, url: str, rows: int) -> float:
    """Seconds from navigation to the box list painted with `rows` rows, in the browser's
    own clock (an already logged-in context; a cold cache each time)."""
    context = browser.contexts[0]
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    page.goto(url + "/#/boxes")
    page.wait_for_function(
        f"() => document.querySelectorAll('tr[data-box]').length >= {rows}", timeout=30_000
    )
    # The next frame after the rows are in the DOM is when they are on screen.
    ms: float = page.evaluate(
        "() => new Promise((r) => requestAnimationFrame(() => r(performance.now())))"
    )
    page.close()
    return ms / 1000


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with owned_server() as server, chromium() as browser:
        names = make_boxes(server, "bench", args.boxes)
        page = log_in(browser, server)
        paints = [first_paint(browser, server.url, len(names)) for _ in range(args.runs)]
        # Everything the dashboard can load: the list, then a box's terminal and desktop.
        fresh = log_in(browser, server)
        assert server.proc is not None
        idle = rss_kb(server.proc.pid)
        fresh.goto(f"{server.url}/#/box/{names[0]}/terminal")
        fresh.wait_for_function("() => (window.paddockTerminals || []).length > 0")
        fresh.click("#tab-desktop")
        fresh.wait_for_selector("#panel-desktop >> text=Start desktop")
        transferred = fresh.evaluate(TRANSFERRED)
        built = sum(p.stat().st_size for p in ASSETS.glob("*.gz") if ".LEGAL" not in p.name)
        # The dashboard open on three boxes: three pages, each with a terminal and the
        # desktop connected (the terminal stays attached while the desktop is shown).
        for name in names[:3]:
            tab = page.context.new_page()
            tab.goto(f"{server.url}/#/box/{name}/terminal")
            tab.wait_for_function("() => (window.paddockTerminals || []).length > 0")
            tab.wait_for_selector(".termstatus", state="hidden", timeout=30_000)
            tab.click("#tab-desktop")
            tab.click("#panel-desktop >> text=Start desktop")
            tab.wait_for_selector("#panel-desktop[data-desktop=connected]", timeout=120_000)
        time.sleep(2)
        open3 = rss_kb(server.proc.pid)
    paint = statistics.median(paints)
    print_table(
        "Dashboard",
        [
            Row(f"first paint, box list of {len(names)}", paint, None, "s", "<= 1000 ms"),
            Row(
                "JS+CSS transferred, list+terminal+desktop",
                transferred / 1e3,
                None,
                "KB",
                "<= 1000 KB (gzip)",
            ),
            Row("JS+CSS built, all of it, gzipped", built / 1e3, None, "KB", "<= 1000 KB"),
            Row("paddockd RSS, dashboard closed", idle / 1024, None, "MB", "reported"),
            Row(
                "paddockd RSS, open on 3 boxes (term+desktop)", open3 / 1024, None, "MB", "reported"
            ),
        ],
    )


if __name__ == "__main__":
    main()
