"""Netlink answers as the network guard reads them: attributes (nested flags masked,
padding skipped, a truncated one ends the list) and whole dumps from a fake kernel
(several datagrams, an error, an interrupted dump, a filter the kernel ignored)."""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator

import pytest

from paddockd.netpolicy import rtnetlink
from paddockd.netpolicy.rtnetlink import NetlinkError, attributes


def attr(kind: int, value: bytes) -> bytes:
    size = 4 + len(value)
    return struct.pack("=HH", size, kind) + value + b"\0" * (-size % 4)


def message(kind: int, body: bytes, flags: int = 0x2, seq: int = 1) -> bytes:
    size = 16 + len(body)
    return struct.pack("=IHHII", size, kind, flags, seq, 0) + body + b"\0" * (-size % 4)


DONE = message(3, struct.pack("=i", 0))


def link(
    name: str, master: int, nsid: int | None = None, isolated: bool = False, flags: int = 0x2
) -> bytes:
    body = struct.pack("=BxHiII", 0, 1, 7, 0, 0) + attr(3, name.encode() + b"\0")
    body += attr(10, struct.pack("=I", master))
    if nsid is not None:
        body += attr(37, struct.pack("=i", nsid))
    slave = attr(33, bytes([isolated]))
    body += attr(0x8000 | 18, attr(4, b"bridge\0") + attr(0x8000 | 5, slave))
    return message(16, body, flags)


class FakeKernel:
    """Each dump request is answered by the next list of datagrams."""

    def __init__(self, *answers: list[bytes]) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []

    def socket(self, *args: object) -> FakeKernel.Socket:
        return FakeKernel.Socket(self)

    class Socket:
        def __init__(self, kernel: FakeKernel) -> None:
            self.kernel = kernel
            self.datagrams: Iterator[bytes] = iter(())

        def __enter__(self) -> FakeKernel.Socket:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def close(self) -> None:
            pass

        def settimeout(self, seconds: float) -> None:
            pass

        def send(self, data: bytes) -> int:
            self.kernel.requests.append(data)
            self.datagrams = iter(self.kernel.answers.pop(0))
            return len(data)

        def recv(self, size: int) -> bytes:
            return next(self.datagrams)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKernel]:
    fake = FakeKernel()
    monkeypatch.setattr(rtnetlink.socket, "socket", fake.socket)
    yield fake


def test_attributes_by_type_with_padding_and_nesting_flag() -> None:
    data = attr(3, b"eth0\0") + attr(0x8000 | 18, attr(5, b"\x01")) + attr(37, struct.pack("=i", 7))
    found = attributes(data, 0, len(data))
    assert bytes(found[3]) == b"eth0\0"
    assert bytes(found[18]) == attr(5, b"\x01")
    assert struct.unpack("=i", found[37])[0] == 7


def test_a_truncated_attribute_ends_the_list() -> None:
    data = attr(3, b"ok\0") + struct.pack("=HH", 64, 9) + b"short"
    assert set(attributes(data, 0, len(data))) == {3}
    assert attributes(struct.pack("=HH", 2, 1), 0, 4) == {}


def test_a_dump_over_several_datagrams_and_a_filter_the_kernel_ignored(
    kernel: FakeKernel,
) -> None:
    kernel.answers = [
        [
            link("veth1", 9, nsid=3, isolated=True) + link("eth0", 2),
            link("veth2", 9) + DONE,
        ]
    ]
    found = rtnetlink.ports_of(9)
    assert [(p.name, p.netnsid, p.isolated) for p in found] == [
        ("veth1", 3, True),
        ("veth2", None, False),
    ]
    kind, flags = struct.unpack_from("=HH", kernel.requests[0], 4)
    assert kind == 18 and flags == 0x301  # RTM_GETLINK, a dump request


def test_an_interrupted_dump_is_asked_again(kernel: FakeKernel) -> None:
    # The first answer lost veth2 to a change mid-dump, and says so (NLM_F_DUMP_INTR).
    kernel.answers = [
        [link("veth1", 9, nsid=1, flags=0x12) + DONE],
        [link("veth1", 9, nsid=1) + link("veth2", 9, nsid=2) + DONE],
    ]
    assert [p.name for p in rtnetlink.ports_of(9)] == ["veth1", "veth2"]
    assert len(kernel.requests) == 2


def test_a_dump_that_never_settles_or_fails_raises(kernel: FakeKernel) -> None:
    intr = message(16, b"", flags=0x12)
    kernel.answers = [[intr + DONE]] * 3
    with pytest.raises(NetlinkError):
        rtnetlink.ports_of(9)
    kernel.answers = [[message(2, struct.pack("=i", -errno.ENODEV) + b"\0" * 16)]]
    with pytest.raises(NetlinkError) as refused:
        rtnetlink.ports_of(9)
    assert refused.value.errno == errno.ENODEV
    kernel.answers = [[struct.pack("=IHHII", 400, 16, 2, 1, 0)]]  # longer than its datagram
    with pytest.raises(NetlinkError):
        rtnetlink.ports_of(9)


def test_addresses_prefer_the_local_one_and_skip_a_link(kernel: FakeKernel) -> None:
    def addr(index: int, prefix: int, local: str, peer: str | None = None) -> bytes:
        body = struct.pack("=BBBBI", socket.AF_INET, prefix, 0, 0, index)
        body += attr(1, socket.inet_aton(peer or local)) + attr(2, socket.inet_aton(local))
        return message(20, body)

    kernel.answers = [
        [
            addr(1, 8, "127.0.0.1")
            + addr(4, 32, "10.9.0.1", peer="10.9.0.2")
            + addr(5, 16, "10.213.0.1")
            + DONE
        ]
    ]
    assert rtnetlink.ipv4_networks(skip=5) == ["127.0.0.1/8", "10.9.0.1/32"]


def one(pid: int) -> int | None:
    with rtnetlink.NamespaceIds() as ids:
        return ids.of(pid)


def test_a_process_namespace_id_or_none(kernel: FakeKernel) -> None:
    answer = struct.pack("=B3x", 0) + attr(1, struct.pack("=i", 4))  # NETNSA_NSID
    kernel.answers = [
        [message(88, answer)],
        [message(88, struct.pack("=B3x", 0) + attr(1, struct.pack("=i", -1)))],
    ]
    assert one(1234) == 4
    assert one(1234) is None  # a namespace without an id here (its own)
    kind, _ = struct.unpack_from("=HH", kernel.requests[0], 4)
    assert kind == 90  # RTM_GETNSID
    kernel.answers = [[message(2, struct.pack("=i", -3) + b"\0" * 16)]]  # ESRCH: gone
    assert one(1234) is None


def test_namespace_ids_over_one_socket_match_answers_to_questions(kernel: FakeKernel) -> None:
    def nsid(value: int, seq: int) -> bytes:
        return message(88, struct.pack("=B3x", 0) + attr(1, struct.pack("=i", value)), seq=seq)

    # The second question's datagrams begin with the first's answer, come late: skipped.
    kernel.answers = [[nsid(4, 1)], [nsid(4, 1), nsid(9, 2)]]
    with rtnetlink.NamespaceIds() as ids:
        assert (ids.of(10), ids.of(11)) == (4, 9)
    assert [struct.unpack_from("=I", r, 8)[0] for r in kernel.requests] == [1, 2]
