"""What a hostile program does from inside a box, as a script the tests run there with the
box's python3 as root: `python3 -c SOURCE ACTION ARGS...`. Standard library only (the box
has nothing else for sure). Kept in one file so each test reads as the attack it makes."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import sys
import time


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _packet(src: str, dst: str, proto: str, port: int) -> bytes:
    """A whole IPv4 packet with any source address: TCP SYN, UDP, or ICMP echo (id=port)."""
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    if proto == "icmp":
        number = 1
        body = struct.pack("!BBHHH", 8, 0, 0, port, 1) + b"paddock"
        body = body[:2] + struct.pack("!H", _checksum(body)) + body[4:]
    else:
        number = 6 if proto == "tcp" else 17
        if proto == "tcp":
            body = struct.pack("!HHIIBBHHH", 40000, port, 1, 0, 5 << 4, 0x02, 64240, 0, 0)
        else:
            body = struct.pack("!HHHH", 40000, port, 8 + 7, 0) + b"paddock"
        pseudo = s + d + struct.pack("!BBH", 0, number, len(body))
        at = 16 if proto == "tcp" else 6
        body = body[:at] + struct.pack("!H", _checksum(pseudo + body)) + body[at + 2 :]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0, 64, number, 0, s, d)
    return header + body


def send(src: str, dst: str, proto: str, port: str) -> None:
    """Forged packets: the kernel sends them as they are, whatever the source says."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(3):
        raw.sendto(_packet(src, dst, proto, int(port)), (dst, 0))
        time.sleep(0.05)


def connect(src: str, dst: str, port: str) -> None:
    """Ordinary sockets bound to a source address: TCP connect and a UDP datagram."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((src, 0))
    udp.sendto(b"paddock", (dst, int(port)))
    tcp = socket.socket()
    tcp.bind((src, 0))
    tcp.settimeout(3)
    try:
        tcp.connect((dst, int(port)))
        print("connected")
    except OSError as exc:
        print(f"refused: {exc}")


def arp(iface: str, mac: str, ip: str, target_ip: str) -> None:
    """Unasked ARP replies saying `ip is at mac`, broadcast and to the gateway."""
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((iface, 0))
    own = bytes.fromhex(mac.replace(":", ""))
    for dest in (b"\xff" * 6,):
        frame = dest + own + struct.pack("!H", 0x0806)
        frame += struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2)
        frame += own + socket.inet_aton(ip) + b"\xff" * 6 + socket.inet_aton(target_ip)
        for _ in range(5):
            raw.send(frame)
            time.sleep(0.05)


def udplisten(port: str, path: str) -> None:
    """Record every datagram arriving on a port (runs in the background)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", int(port)))
    with open(path, "ab", buffering=0) as out:
        out.write(b"")
        while True:
            data, peer = sock.recvfrom(2048)
            out.write(f"{peer[0]} {data!r}\n".encode())


def udp6(dst: str, port: str) -> None:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    for _ in range(3):
        try:
            sock.sendto(b"paddock", (dst, int(port), 0, socket.if_nametoindex("eth0")))
        except OSError as exc:
            print(f"refused: {exc}")
        time.sleep(0.05)


def keys(count: str) -> None:
    """Session keyrings with long names, as many as the kernel takes: once every box's
    root was one host uid, whose 200-key quota stopped every exec on the server."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
    made, why = 0, "none"
    for i in range(int(count)):
        name = f"paddock-flood-{i}-".ljust(400, "k").encode()
        # keyctl(KEYCTL_JOIN_SESSION_KEYRING, name): what runc does for every exec.
        joined = libc.syscall(keyctl, 1, ctypes.c_char_p(name))
        added = libc.syscall(add_key, b"user", name, b"x" * 32, 32, -3)  # -3: the session's
        if joined < 0 and added < 0:
            why = os.strerror(ctypes.get_errno())
            break
        made += 1
    print(f"made {made} ({why})")


def inotify(hold: str) -> None:
    """inotify instances until the kernel refuses one; with hold=1, kept (in the background)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fds = []
    while True:
        fd = libc.inotify_init1(0)
        if fd < 0:
            why = os.strerror(ctypes.get_errno())
            break
        fds.append(fd)
    print(f"made {len(fds)} ({why})", flush=True)
    while hold == "1":
        time.sleep(60)


if __name__ == "__main__":
    actions = {f.__name__: f for f in (send, connect, arp, udplisten, udp6, keys, inotify)}
    actions[sys.argv[1]](*sys.argv[2:])
