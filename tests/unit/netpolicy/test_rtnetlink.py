"""Netlink attribute parsing: nested flags masked, padding skipped, a truncated one ends it."""

from __future__ import annotations

import struct

from paddockd.netpolicy.rtnetlink import attributes


def attr(kind: int, value: bytes) -> bytes:
    size = 4 + len(value)
    return struct.pack("=HH", size, kind) + value + b"\0" * (-size % 4)


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
