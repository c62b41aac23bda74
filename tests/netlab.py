"""The tests' "internet": a network namespace on this machine, addressed from 198.18.0.0/15
(the benchmarking range) and also given 169.254.169.254, routed from the host. A listener
records every connection, so "blocked" is proven by what arrived, and a broken rule can
never send a packet off the machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

LINK_HOST, LINK_NS = "198.18.255.1", "198.18.255.2"
ALLOWED = "198.18.1.1"
WILD = "198.18.1.2"  # what *.wild.test resolves to
OTHER = "198.18.2.1"
METADATA = "169.254.169.254"
# Not the public internet, routed here all the same so that a rule that fails to refuse
# them is caught by the listener: a private (RFC 1918) address and two more metadata
# services (Alibaba's, inside CGNAT, and Azure's wire server).
PRIVATE = "10.99.0.1"
ALIBABA_METADATA = "100.100.100.200"
AZURE_METADATA = "168.63.129.16"
ROUTED = [
    "198.18.1.0/24",
    "198.18.2.0/24",
    *(f"{a}/32" for a in (METADATA, PRIVATE, ALIBABA_METADATA, AZURE_METADATA)),
]


def ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


class TestInternet:
    __test__ = False  # a fixture's helper, not a test class

    def __init__(self, workdir: Path) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns, self.host_if, self.ns_if = f"pdt-inet-{tag}", f"pdti{tag}", f"pdtn{tag}"
        self.log = workdir / f"netlab-{tag}.jsonl"
        self.log.touch()
        for route in ROUTED:  # leftovers of an interrupted run
            ip("route", "del", route, check=False)
        for stale in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True
        ).stdout.split():
            if stale.startswith("pdt-inet-"):
                ip("netns", "del", stale, check=False)
        ip("netns", "add", self.ns)
        ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        ip("link", "set", self.ns_if, "netns", self.ns)
        ip("addr", "add", f"{LINK_HOST}/30", "dev", self.host_if)
        ip("link", "set", self.host_if, "up")
        ip("-n", self.ns, "addr", "add", f"{LINK_NS}/30", "dev", self.ns_if)
        ip("-n", self.ns, "link", "set", self.ns_if, "up")
        ip("-n", self.ns, "link", "set", "lo", "up")
        for addr in (ALLOWED, WILD, OTHER, METADATA, PRIVATE, ALIBABA_METADATA, AZURE_METADATA):
            ip("-n", self.ns, "addr", "add", f"{addr}/32", "dev", "lo")
        ip("-n", self.ns, "route", "add", "default", "via", LINK_HOST)
        for route in ROUTED:
            ip("route", "add", route, "via", LINK_NS)
        self._spawned: list[subprocess.Popen[bytes]] = []
        listener = Path(__file__).with_name("netlab_listener.py")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, str(listener), str(self.log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        import socket

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:  # through the host route into the namespace: nothing leaves the machine
                with socket.create_connection((ALLOWED, 80), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the test internet's listener did not start")

    def spawn(self, *argv: str) -> subprocess.Popen[bytes]:
        """Another server in the test internet (stopped by close())."""
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._spawned.append(proc)
        return proc

    def sniff(self) -> Path:
        """Start recording every IPv4 packet reaching the namespace; returns the log."""
        log = self.log.with_name(self.log.stem + "-packets.jsonl")
        ready = log.with_suffix(".ready")
        log.write_text("")
        sniffer = Path(__file__).with_name("netlab_sniffer.py")
        self.spawn(sys.executable, str(sniffer), self.ns_if, str(log), str(ready))
        deadline = time.monotonic() + 10
        while not ready.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the test internet's packet recorder did not start")
            time.sleep(0.05)
        return log

    def connections(self, local: str | None = None) -> list[dict[str, object]]:
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [r for r in rows if local is None or r["local"] == local]

    def reset(self) -> None:
        self.log.write_text("")

    def close(self) -> None:
        for proc in [self.proc, *self._spawned]:
            proc.terminate()
            proc.wait(timeout=5)
        ip("netns", "del", self.ns, check=False)  # takes its end of the veth pair, and so ours
        for route in ROUTED:
            ip("route", "del", route, check=False)
        ip("link", "del", self.host_if, check=False)
        ip("netns", "del", self.ns, check=False)
