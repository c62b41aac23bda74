"""The desktop on real boxes: screenshots decoded by Pillow, windows found by xdotool,
computer-use input, and the browser page driven end to end in Debian's chromium."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from .conftest import Server

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def desk(server: Server) -> Iterator[str]:
    """One box for the module: the desktop is started once, as a user's would be."""
    name = f"desk-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", name, "--type", "medium", check=True)
    yield name
    server.cli("rm", "--force", name)


def shot_bytes(server: Server, box: str, *args: str) -> Image.Image:
    with server.client() as c:
        data = c.screenshot(box, size=args[0] if args else None)
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def wait_window(server: Server, box: str, title: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done = server.cli(
            "exec", "--desktop", "--wait", box, "--", "xdotool", "search", "--name", title
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.split()[0]
        time.sleep(0.3)
    raise AssertionError(f"no window named {title} appeared")


def xdo(server: Server, box: str, *args: str) -> str:
    return server.cli("exec", "--desktop", "--wait", box, "--", "xdotool", *args, check=True).stdout


def active_title(server: Server, box: str) -> str:
    return xdo(server, box, "getactivewindow", "getwindowname").strip()


def geometry(server: Server, box: str, window: str) -> tuple[int, int, int, int]:
    out = server.cli(
        "exec", "--desktop", "--wait", box, "--", "xdotool", "getwindowgeometry", "--shell", window
    ).stdout
    g = dict(line.split("=", 1) for line in out.split())
    return int(g["X"]), int(g["Y"]), int(g["WIDTH"]), int(g["HEIGHT"])


def test_screenshot_is_a_real_png_of_the_requested_size(server: Server, desk: str) -> None:
    image = shot_bytes(server, desk, "1024x768")
    assert image.format == "PNG" and image.size == (1024, 768)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50, "the desktop is one flat colour"
    assert shot_bytes(server, desk, "1280x800").size == (1280, 800)


def test_cli_screenshot_writes_a_file(server: Server, desk: str, tmp_path: Path) -> None:
    out = tmp_path / "d.png"
    server.cli("screenshot", desk, "-o", str(out), check=True)
    assert Image.open(out).size == (1280, 800)


def test_a_launched_window_appears_and_changes_the_picture(server: Server, desk: str) -> None:
    title = f"pdt-{uuid.uuid4().hex[:6]}"
    before = shot_bytes(server, desk).convert("RGB")
    started = time.monotonic()
    done = server.cli("exec", "--desktop", desk, "--", "xfce4-terminal", "--title", title)
    assert done.returncode == 0 and time.monotonic() - started < 10, done.stderr
    window = wait_window(server, desk, title)
    time.sleep(0.5)  # let it paint
    x, y, w, h = geometry(server, desk, window)
    after = shot_bytes(server, desk).convert("RGB")
    box = (max(x, 0), max(y, 0), min(x + w, 1280), min(y + h, 800))
    assert ImageChops.difference(before.crop(box), after.crop(box)).getbbox() is not None


def test_computer_use_click_type_and_key(server: Server, desk: str) -> None:
    title = f"pdt-{uuid.uuid4().hex[:6]}"
    server.cli("exec", "--desktop", desk, "--", "xfce4-terminal", "--title", title, check=True)
    window = wait_window(server, desk, title)
    x, y, w, h = geometry(server, desk, window)
    server.cli("desktop", desk, "click", str(x + w // 2), str(y + h // 2), check=True)
    server.cli("desktop", desk, "type", "echo typed-by-paddock > /tmp/typed", check=True)
    server.cli("desktop", desk, "key", "Return", check=True)
    deadline = time.monotonic() + 10
    while server.cli("exec", desk, "--", "cat", "/tmp/typed").stdout.strip() != "typed-by-paddock":
        assert time.monotonic() < deadline, "the typed command never ran"
        time.sleep(0.3)


def test_desktop_bad_input(server: Server, desk: str) -> None:
    for args, message in (
        (["screenshot", desk, "--size", "10x10"], "out of range"),
        (["screenshot", desk, "--size", "big"], "invalid desktop size"),
        (["desktop", desk, "click", "x", "1"], "usage"),
        (["desktop", desk, "key", "ctrl+;rm"], "invalid key"),
        (["exec", "--desktop", desk, "--", "no-such-program-x"], "not found"),
    ):
        done = server.cli(*args)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)


def test_desktop_comes_back_after_its_processes_are_killed(server: Server, desk: str) -> None:
    server.cli("exec", "-u", "root", desk, "--", "pkill", "-x", "xfce4-session", check=True)
    server.cli("exec", "-u", "root", desk, "--", "pkill", "-x", "Xvnc", check=True)
    deadline = time.monotonic() + 30
    while True:
        done = server.cli("exec", desk, "--", "pgrep", "-x", "xfdesktop")
        if done.returncode == 0:
            break
        assert time.monotonic() < deadline, "the session did not come back"
        time.sleep(0.5)
    assert shot_bytes(server, desk).size[0] > 0


def test_desktop_after_stop_and_resume_and_on_a_stopped_box(server: Server, desk: str) -> None:
    server.cli("stop", desk, check=True)
    done = server.cli("screenshot", desk, "-o", "/dev/null")
    assert done.returncode == 1 and "resume" in done.stderr, done.stderr
    server.cli("resume", desk, check=True)
    image = shot_bytes(server, desk)
    assert image.size == (1280, 800)
    # The first picture after a resume shows the desktop, not a black screen.
    colours = image.convert("RGB").getcolors(maxcolors=4096)
    assert colours is None or len(colours) > 8, "the first screenshot was (nearly) flat"


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_links_are_refused_without_a_valid_token(server: Server, desk: str) -> None:
    link = json.loads(server.cli("desktop", desk, "--json", check=True).stdout)
    box_id = link["url"].split("/desktop/")[1].split("?")[0]
    assert http_status(link["url"]) == 200
    assert http_status(f"{server.url}/desktop/{box_id}") == 401
    assert http_status(f"{server.url}/desktop/{box_id}?token=forged.token") == 401
    other = f"o-{uuid.uuid4().hex[:6]}"
    server.cli("new", "--name", other, check=True)
    try:
        other_id = json.loads(server.cli("show", other, "--json", check=True).stdout)["id"]
        assert http_status(f"{server.url}/desktop/{other_id}?token={link['token']}") == 401
    finally:
        server.cli("rm", "--force", other)
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    ws = server.url.replace("http", "ws", 1) + f"/v1/boxes/{box_id}/desktop/ws"
    with pytest.raises(InvalidStatus):
        connect(ws + "?token=forged.token", open_timeout=10).close()
    with connect(f"{ws}?token={link['token']}", open_timeout=10) as conn:
        assert conn.recv(timeout=10)[:4] == b"RFB "  # the box's VNC server answers


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_browser_shows_the_desktop_and_clicks_reach_the_box(server: Server, desk: str) -> None:
    from playwright.sync_api import sync_playwright

    # Two windows side by side; the one launched last has the focus.
    titles = [f"pdt-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    windows = []
    for title, (x, y) in zip(titles, [(40, 80), (700, 400)], strict=True):
        server.cli("exec", "--desktop", desk, "--", "xfce4-terminal", "--title", title, check=True)
        windows.append(wait_window(server, desk, title))
        xdo(server, desk, "windowsize", "--sync", windows[-1], "400", "300")
        xdo(server, desk, "windowmove", "--sync", windows[-1], str(x), str(y))
        xdo(server, desk, "windowactivate", "--sync", windows[-1])
    assert active_title(server, desk) == titles[1]
    link = json.loads(server.cli("desktop", desk, "--json", check=True).stdout)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(link["url"])
            page.wait_for_selector("body[data-state=connected]", timeout=20000)
            page.wait_for_timeout(1000)  # first frame
            lit = page.evaluate(
                """() => { const c = document.querySelector('#screen canvas');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                const seen = new Set(); for (let i = 0; i < d.length; i += 4 * 97)
                    seen.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); return seen.size; }"""
            )
            assert lit > 20, "the canvas shows a blank desktop"
            # Click the first window through the page: it must get the focus in the box.
            x, y, w, h = geometry(server, desk, windows[0])
            page.mouse.click(x + w // 2, y + h // 2)
            deadline = time.monotonic() + 10
            while active_title(server, desk) != titles[0]:
                assert time.monotonic() < deadline, "the click in the page did not reach the box"
                time.sleep(0.3)
        finally:
            browser.close()
