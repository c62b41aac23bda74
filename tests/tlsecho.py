"""Runs inside the test internet's namespace: an HTTPS server on port 443 for several host
names (a certificate each, chosen by the ClientHello's server name), recording every request
(server name, Host, headers) as a JSON line. A request for a repository (/repo...) without
a password is asked for Basic credentials (as git's servers do); any other gets its own
headers back as JSON.

    python tlsecho.py LOG NAME=CERT:KEY [NAME=CERT:KEY ...]
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _password(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(token).decode().partition(":")[2]
    except ValueError:
        return ""


class Handler(BaseHTTPRequestHandler):
    log_path = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode(errors="replace") if length else ""
        sni = getattr(self.connection, "paddock_sni", None)
        record = {
            "sni": sni,
            "host": self.headers.get("host"),
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        with open(self.log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        if self.path.startswith("/repo") and not _password(self.headers.get("authorization")):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="tests"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps(record["headers"]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = _answer


def main() -> None:
    Handler.log_path = sys.argv[1]
    contexts = {}
    for spec in sys.argv[2:]:
        name, _, files = spec.partition("=")
        cert, _, key = files.partition(":")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        contexts[name] = ctx
    first = next(iter(contexts.values()))

    def choose(sock: ssl.SSLSocket, name: str | None, _: ssl.SSLContext) -> None:
        sock.paddock_sni = name  # type: ignore[attr-defined]
        if name in contexts:
            sock.context = contexts[name]

    first.sni_callback = choose  # type: ignore[assignment]
    server = ThreadingHTTPServer(("0.0.0.0", 443), Handler)
    plain = server.socket

    def accept() -> tuple[ssl.SSLSocket, object]:
        conn, peer = plain.accept()
        tls = first.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError):
            tls.close()
            raise
        return tls, peer

    server.get_request = accept  # type: ignore[method-assign]
    server.serve_forever()


if __name__ == "__main__":
    main()
