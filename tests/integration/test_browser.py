"""A web browser in the box: an agent serves the app it built, opens it on the box's
desktop with chromium, and sees it in a screenshot; Playwright in the box drives the same
chromium (never a downloaded browser). The page fills the window with one colour, so
"the page is on screen" is checked without OCR: the screenshot's centre has that colour."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator

import pytest
from PIL import Image

from .conftest import Server

COLOUR = (0x12, 0xAB, 0x34)
PAGE = (
    '<!doctype html><title>app</title><body style="margin:0;height:100vh;'
    'background:#12ab34"><h1>hello from the box</h1></body>'
)
SERVE = (
    "mkdir -p /tmp/www; cat > /tmp/www/index.html; "
    "setsid python3 -m http.server 8000 -d /tmp/www >/dev/null 2>&1 < /dev/null & sleep 1"
)


@pytest.fixture(scope="module")
def web(server: Server) -> Iterator[str]:
    name = f"web-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--type", "medium", check=True)
    server.cli("exec", name, "--", "sh", "-c", SERVE, stdin=PAGE.encode(), check=True)
    yield name
    server.cli("rm", "--force", name)


def centre(server: Server, box: str) -> tuple[int, int, int]:
    """Near the middle, off the pointer (Xvnc draws it into the picture, at the centre
    until something moves it)."""
    with server.client() as c:
        image = Image.open(io.BytesIO(c.screenshot(box))).convert("RGB")
    pixel: tuple[int, int, int] = image.getpixel((image.width // 2 + 80, image.height // 2 + 80))
    return pixel


def near(seen: tuple[int, int, int], want: tuple[int, int, int]) -> bool:
    # A browser may colour-manage what it paints by a step or two.
    return all(abs(a - b) <= 6 for a, b in zip(seen, want, strict=True))


def test_chromium_shows_the_app_on_the_desktop(server: Server, web: str) -> None:
    done = server.cli(
        "exec", "--desktop", web, "--", "chromium", "--start-maximized", "http://localhost:8000/"
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 40
    while not near(seen := centre(server, web), COLOUR):
        assert time.monotonic() < deadline, f"the page never showed (centre {seen})"
        time.sleep(1)


def test_chromium_is_the_default_browser(server: Server, web: str) -> None:
    out = server.sh(
        web, "xdg-mime query default text/html; readlink -f $(command -v x-www-browser)"
    )
    assert out.split() == ["chromium.desktop", "/usr/bin/chromium"]


def test_playwright_in_the_box_drives_its_chromium(server: Server, web: str) -> None:
    script = (
        "from playwright.sync_api import sync_playwright\n"
        "with sync_playwright() as p:\n"
        "    browser = p.chromium.launch(executable_path='/usr/bin/chromium')\n"
        "    page = browser.new_page()\n"
        "    page.goto('http://localhost:8000/')\n"
        "    print(page.inner_text('h1'))\n"
        "    browser.close()\n"
    )
    done = server.cli("exec", web, "--", "python3", "-c", script, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello from the box"
    node = (
        "const { chromium } = require('playwright-core');"
        "(async () => { const b = await chromium.launch({ executablePath: '/usr/bin/chromium' });"
        "const p = await b.newPage(); await p.goto('http://localhost:8000/');"
        "console.log(await p.innerText('h1')); await b.close(); })();"
    )
    done = server.cli(
        "exec",
        "-e",
        "NODE_PATH=/usr/local/lib/node_modules",
        web,
        "--",
        "node",
        "-e",
        node,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello from the box"


def test_apt_lists_are_there(server: Server, web: str) -> None:
    out = server.sh(web, "apt-cache policy ripgrep | head -3")
    assert "Candidate:" in out and "(none)" not in out
