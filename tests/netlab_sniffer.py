"""Runs inside the test internet's namespace: records every IPv4 packet that arrives on
its link (source, destination, protocol, destination port) as a JSON line, whatever the
protocol and whether or not anything listens (for ICMP, the echo identifier stands in
the port's place): the proof that a spoofed or refused packet
never got here. Touches READY once capturing."""

from __future__ import annotations

import json
import socket
import struct
import sys
from pathlib import Path

ETH_P_IP = 0x0800


def main(iface: str, log_path: str, ready: str) -> None:
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    sniff.bind((iface, ETH_P_IP))
    Path(ready).touch()
    while True:
        packet = sniff.recv(65535)
        if len(packet) < 20:
            continue
        header = (packet[0] & 0x0F) * 4
        proto = packet[9]
        # TCP/UDP: the destination port; ICMP echo: its identifier.
        at = header + 2 if proto in (6, 17) else header + 4
        port = struct.unpack("!H", packet[at : at + 2])[0] if proto in (1, 6, 17) else 0
        row = {
            "src": socket.inet_ntoa(packet[12:16]),
            "dst": socket.inet_ntoa(packet[16:20]),
            "proto": proto,
            "port": port,
        }
        with open(log_path, "a") as log:
            log.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
