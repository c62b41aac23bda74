"""Runs inside the test internet's namespace: accepts TCP on the given ports, records every
connection (local address, port, peer) as a JSON line, answers, and on the stream port
sends its answer slowly (for "open connections may finish" tests). Port 53 (TCP and UDP)
stands for a DNS server a box should never reach: anything arriving there is recorded."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time


def serve(port: int, log_path: str, slow: bool) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    while True:
        conn, peer = srv.accept()
        local = conn.getsockname()
        with open(log_path, "a") as log:
            log.write(json.dumps({"local": local[0], "port": local[1], "peer": peer[0]}) + "\n")
        threading.Thread(target=answer, args=(conn, slow), daemon=True).start()


def answer(conn: socket.socket, slow: bool) -> None:
    with conn:
        conn.settimeout(5)
        try:
            # The whole request, not the first segment: bash's printf writes a line at a
            # time, and closing with the rest unread makes the kernel answer with a reset
            # (seen as "connection reset" on the box's side after a full answer).
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 4096:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                request += chunk
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n")
            for i in range(6 if slow else 1):
                conn.sendall(f"chunk-{i}\n".encode())
                if slow:
                    time.sleep(0.5)
        except OSError:
            pass


def serve_bulk(port: int, megabytes: int) -> None:
    """Throughput: every connection gets this many MiB of zeros."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(16)
    block = bytes(1 << 20)

    def send(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(4096)  # unread input would turn the close into a reset
                for _ in range(megabytes):
                    conn.sendall(block)
            except OSError:
                pass

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=send, args=(conn,), daemon=True).start()


def serve_udp(port: int, log_path: str) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("0.0.0.0", port))
    while True:
        _, peer = srv.recvfrom(4096)
        with open(log_path, "a") as log:
            log.write(json.dumps({"local": "udp", "port": port, "peer": peer[0]}) + "\n")


if __name__ == "__main__":
    log_path = sys.argv[1]
    threading.Thread(target=serve, args=(53, log_path, False), daemon=True).start()
    threading.Thread(target=serve_bulk, args=(82, 512), daemon=True).start()
    threading.Thread(target=serve_udp, args=(53, log_path), daemon=True).start()
    threading.Thread(target=serve, args=(81, log_path, True), daemon=True).start()
    serve(80, log_path, False)
