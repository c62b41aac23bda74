"""Terminal keystroke echo: the dashboard's terminal against `docker exec -it`, measured the
same way: one key leaves the client, and the clock stops when the shell's echo of it is
back in that client. Every side runs the same login shell (`bash -l` as the box user, TERM
xterm-256color) in the same box.

- docker exec -it: the docker CLI in a pseudo-terminal of our own (as in a terminal
  window), attached to the box engine; the key is written to the terminal, the echo read
  back from it.
- dashboard, native client: the dashboard's terminal WebSocket (/v1/boxes/{b}/terminal/ws)
  from a Python program: the key sent as a binary message, the echo read from the frames
  that come back. Client for client, this is the like of the docker CLI.
- dashboard, in chromium: the key goes in through xterm.js (`term.input`, the path of a
  real keystroke: onData, the WebSocket, paddockd, the engine's exec); the echo is timed
  when its WebSocket message arrives in the page. It adds the browser's own WebSocket path
  (renderer and network processes), which no terminal program pays: the last row is that
  path alone, a page's WebSocket to an echo server on loopback that answers at once.

    /opt/paddock/venv/bin/python -m bench.terminal            # 200 keys each (~1 min)
    /opt/paddock/venv/bin/python -m bench.terminal --keys 50
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import shutil
import statistics
import threading
import time
from typing import Any

import docker
from tests.harness import ENGINE_SOCKET, Server
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from ._dashboard import chromium, log_in, make_boxes, owned_server
from ._table import Row, print_table

DOCKER = shutil.which("docker") or "docker"
KEY, CLEAR = "x", "\x15"  # Ctrl+U empties the line again, so it never wraps
# In the page: each key through xterm.js, timed to the WebSocket message carrying its echo
# (exec frames: 1 byte kind, 4 bytes length, payload; kind 1 is stdout).
ECHOES = """async ([n, key, clear]) => {
  const s = window.paddockTerminals[0];
  const echoed = (data) => {
    const b = new Uint8Array(data);
    for (let at = 0; at + 5 <= b.length;) {
      const len = (b[at + 1] << 24) | (b[at + 2] << 16) | (b[at + 3] << 8) | b[at + 4];
      const text = new TextDecoder().decode(b.subarray(at + 5, at + 5 + len));
      if (b[at] === 1 && text.includes(key)) return true;
      at += 5 + len;
    }
    return false;
  };
  const samples = [];
  for (let i = 0; i < n; i++) {
    const back = new Promise((resolve) => {
      const seen = (e) => {
        if (typeof e.data !== "string" && echoed(e.data)) {
          s.ws.removeEventListener("message", seen);
          resolve(performance.now());
        }
      };
      s.ws.addEventListener("message", seen);
    });
    const start = performance.now();
    s.term.input(key, true);
    samples.push((await back) - start);
    if (i % 20 === 19) s.term.input(clear, true);
    await new Promise((r) => setTimeout(r, 15));
  }
  s.term.input(clear, true);
  return samples;
}"""


def dashboard_echoes(server: Server, box: str, keys: int) -> list[float]:
    """Seconds per key, in the dashboard's terminal."""
    with chromium() as browser:
        page = log_in(browser, server)
        page.goto(f"{server.url}/#/box/{box}/terminal")
        page.wait_for_function("() => (window.paddockTerminals || []).length > 0")
        page.wait_for_selector(".termstatus", state="hidden", timeout=30_000)
        page.wait_for_function(
            """() => { const b = window.paddockTerminals[0].term.buffer.active;
              return /[$#] $/.test(b.getLine(b.cursorY + b.baseY).translateToString(true)); }""",
            timeout=30_000,
        )
        page.evaluate(ECHOES, [10, KEY, CLEAR])  # warming up, as on the docker side
        samples: list[float] = page.evaluate(ECHOES, [keys, KEY, CLEAR])
        page.context.close()
    return [ms / 1000 for ms in samples]


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {wanted!r} from docker exec -it (got {seen[-200:]!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            seen += os.read(fd, 65536)
    return seen


def docker_echoes(container: str, keys: int) -> list[float]:
    """Seconds per key, in `docker exec -it` running in a pseudo-terminal of our own."""
    argv = [DOCKER, "exec", "-it", "-u", "abc", "-w", "/config", "-e", "TERM=xterm-256color"]
    argv += [container, "/bin/bash", "-l"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the docker CLI, on the pseudo-terminal
        os.execve(DOCKER, argv, {**os.environ, "DOCKER_HOST": f"unix://{ENGINE_SOCKET}"})
    try:
        _read_until(fd, b"$ ", 30)
        samples = []
        for i in range(10 + keys):  # the first ten warm up, as in the page
            start = time.perf_counter()
            os.write(fd, KEY.encode())
            _read_until(fd, KEY.encode(), 10)
            if i >= 10:
                samples.append(time.perf_counter() - start)
            if i % 20 == 19:
                os.write(fd, CLEAR.encode())
                time.sleep(0.05)
                _drain(fd)
            time.sleep(0.015)
        os.write(fd, (CLEAR + "exit\n").encode())
        _drain(fd)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return samples


def _drain(fd: int) -> None:
    while select.select([fd], [], [], 0.05)[0]:
        try:
            os.read(fd, 65536)
        except OSError:  # the other end closed
            return


def _echoed(message: str | bytes, key: bytes) -> bool:
    """Whether a terminal WebSocket message carries output with `key` in it (exec frames:
    1 byte kind, 4 bytes length, payload)."""
    if isinstance(message, str):
        return False
    at = 0
    while at + 5 <= len(message):
        size = int.from_bytes(message[at + 1 : at + 5], "big")
        if message[at] == 1 and key in message[at + 5 : at + 5 + size]:
            return True
        at += 5 + size
    return False


def native_echoes(server: Server, box: str, keys: int) -> list[float]:
    """Seconds per key over the dashboard's terminal WebSocket, from a Python client."""
    url = server.url.replace("http", "ws", 1) + f"/v1/boxes/{box}/terminal/ws"
    key, clear = KEY.encode(), CLEAR.encode()
    auth = {"Authorization": f"Bearer {server.token}"}
    with connect(url, additional_headers=auth) as ws:
        ws.send(json.dumps({"key": os.urandom(8).hex(), "cols": 80, "rows": 24}))
        seen = b""
        while b"$ " not in seen:
            message = ws.recv(timeout=30)
            seen += message if isinstance(message, bytes) else b""
        samples = []
        for i in range(10 + keys):
            start = time.perf_counter()
            ws.send(key)
            while not _echoed(ws.recv(timeout=10), key):
                pass
            if i >= 10:
                samples.append(time.perf_counter() - start)
            if i % 20 == 19:
                ws.send(clear)
                time.sleep(0.05)
            time.sleep(0.015)
        ws.send(json.dumps({"type": "close"}))
    return samples


# A page's WebSocket to a loopback echo server, timed as ECHOES times the terminal's.
FLOOR = """async ([url, n]) => {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  await new Promise((ok) => { ws.onopen = ok; });
  const samples = [];
  for (let i = 0; i < n; i++) {
    const back = new Promise((ok) => { ws.onmessage = () => ok(performance.now()); });
    const start = performance.now();
    ws.send(new Uint8Array([120]));
    samples.push((await back) - start);
    await new Promise((r) => setTimeout(r, 15));
  }
  ws.close();
  return samples;
}"""


def browser_floor(keys: int) -> list[float]:
    """Seconds per round trip of chromium's own WebSocket path (no paddockd, no box)."""

    def echo(conn: ServerConnection) -> None:
        for message in conn:
            conn.send(message)

    with serve(echo, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        with chromium() as browser:
            page = browser.new_page()  # a blank page: no CSP limits where it connects
            page.evaluate(FLOOR, [url, 10])
            samples: list[float] = page.evaluate(FLOOR, [url, keys])
        server.shutdown()
    return [ms / 1000 for ms in samples]


def container_of(server: Server, box: str) -> str:
    with server.client() as c:
        box_id = c.get_box(box).id
    api: Any = docker.APIClient(base_url=f"unix://{ENGINE_SOCKET}")
    (found,) = api.containers(filters={"label": f"paddock.box={box_id}"})
    return str(found["Id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200)
    args = parser.parse_args()
    with owned_server() as server:
        (box,) = make_boxes(server, "echo", 1)
        container = container_of(server, box)
        # Alternate, so a slow moment of the machine falls on every side alike.
        raw: list[float] = []
        native: list[float] = []
        browser: list[float] = []
        floor: list[float] = []
        for _ in range(2):
            raw += docker_echoes(container, args.keys // 2)
            native += native_echoes(server, box, args.keys // 2)
            browser += dashboard_echoes(server, box, args.keys // 2)
            floor += browser_floor(args.keys // 2)

    def p90(samples: list[float]) -> float:
        return statistics.quantiles(samples, n=10)[8]

    median = statistics.median
    print_table(
        f"Terminal keystroke echo ({len(raw)} keys each; raw: docker exec -it in a pty)",
        [
            Row(
                "echo, dashboard terminal, native client",
                median(native),
                median(raw),
                "s",
                "ratio <= 2.0",
            ),
            Row(
                "echo, dashboard terminal, in chromium",
                median(browser),
                median(raw),
                "s",
                "ratio <= 2.0",
            ),
            Row("echo p90, native client", p90(native), p90(raw), "s", "reported"),
            Row("echo p90, in chromium", p90(browser), p90(raw), "s", "reported"),
            Row("chromium's WebSocket alone (loopback echo)", median(floor), None, "s", "reported"),
        ],
    )


if __name__ == "__main__":
    main()
