"""A web app for the preview tests, run inside a box on 127.0.0.1:PORT (the standard
library only): /headers (what it was sent, as JSON), /echo (POST body back), /sse (three
events, 0.3 s apart), /cookie (sets its own and a forged paddockd cookie), /ws (a
WebSocket echo)."""

import base64
import hashlib
import json
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class App(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status, body, kind="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/ws"):
            return self._websocket()
        if self.path.startswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(f"data: {i} {time.time()}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.3)
            self.close_connection = True
            return
        if self.path.startswith("/cookie"):
            cookies = [
                ("Set-Cookie", "app=1; Path=/"),
                ("Set-Cookie", "paddock_session=evil"),
                ("Set-Cookie", "nameless-value; Path=/"),
                ("Set-Cookie", "=also-nameless"),
                ("Clear-Site-Data", '"cookies", "storage"'),
            ]
            return self._send(200, b"ok", "text/plain", cookies)
        seen = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        self._send(200, json.dumps(seen).encode())

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self._send(200, self.rfile.read(length), "application/octet-stream")

    def _websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:
                sock.sendall(b"\x88\x02" + data[:2])
                return
            reply = b"echo:" + data
            size = len(reply)
            header = bytes([0x80 | opcode])
            header += bytes([size]) if size < 126 else b"\x7e" + struct.pack("!H", size)
            sock.sendall(header + reply)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), App)
    server.daemon_threads = True
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.serve_forever()
