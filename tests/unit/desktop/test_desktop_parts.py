"""The desktop's host-side parts: PNG encoding, signed links, the view-only filter, sizes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from paddockd.desktop import png
from paddockd.desktop.links import DesktopLinks
from paddockd.desktop.viewonly import ViewOnlyFilter
from paddockd.domain.errors import InvalidRequest, Unauthorized
from paddockd.services.desktop import detached, parse_size


def test_png_round_trip() -> None:
    # 2x2: red, green / blue, white, as B,G,R,X.
    bgrx = bytes([0, 0, 255, 0, 0, 255, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0])
    data = png.encode(2, 2, bgrx)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height, depth, colour = struct.unpack("!IIBB", data[16:26])
    assert (width, height, depth, colour) == (2, 2, 8, 2)
    idat = data.index(b"IDAT")
    (length,) = struct.unpack("!I", data[idat - 4 : idat])
    rows = zlib.decompress(data[idat + 4 : idat + 4 + length])
    assert rows == b"\x00" + bytes([255, 0, 0, 0, 255, 0]) + b"\x00" + bytes(
        [0, 0, 255] + [255] * 3
    )


def test_links_are_per_box_short_lived_and_unforgeable(tmp_path: Path) -> None:
    links = DesktopLinks(tmp_path / "desktop.key")
    assert (tmp_path / "desktop.key").stat().st_mode & 0o777 == 0o600
    token = links.token(links.issue("box1", 60, view_only=True, now=1000))
    grant = links.verify(token, "box1", now=1030)
    assert grant.view_only and grant.box_id == "box1"
    with pytest.raises(Unauthorized, match="another box"):
        links.verify(token, "box2", now=1030)
    with pytest.raises(Unauthorized, match="expired"):
        links.verify(token, "box1", now=1061)
    sig = token.partition(".")[2]
    forged = links.token(links.issue("box1", 60, view_only=False, now=1000)).split(".")[0]
    with pytest.raises(Unauthorized, match="not valid"):
        links.verify(f"{forged}.{sig}", "box1", now=1030)
    with pytest.raises(Unauthorized):
        links.verify("", "box1")
    # Another server's key signs nothing here.
    other = DesktopLinks(tmp_path / "other.key")
    with pytest.raises(Unauthorized, match="not valid"):
        links.verify(other.token(other.issue("box1", 60, False)), "box1")


@pytest.mark.parametrize(
    "token",
    [
        "é",
        "é.é",
        "abc.é",
        "ééé.abc",
        "abc.\udcff",
        ".",
        "a.b.c",
        "%%%.%%%",
        "\x00.\x00",
        "x" * 5000,
    ],
)
def test_a_malformed_link_is_just_not_valid(tmp_path: Path, token: str) -> None:
    # Not a TypeError from hmac (a 500): the same answer as a wrong signature.
    links = DesktopLinks(tmp_path / "desktop.key")
    with pytest.raises(Unauthorized, match="not valid"):
        links.verify(token, "box1")
    good = links.token(links.issue("box1", 60, view_only=False))
    with pytest.raises(Unauthorized, match="not valid"):
        links.verify(good + "é", "box1")


def test_view_only_filter_passes_viewing_and_drops_input() -> None:
    f = ViewOnlyFilter()
    handshake = b"RFB 003.008\n" + b"\x01" + b"\x01"
    pixel_format = b"\x00" + b"\x00" * 19
    encodings = struct.pack("!BxHii", 2, 2, 0, -308)
    update = struct.pack("!BBHHHH", 3, 0, 0, 0, 1280, 800)
    key = struct.pack("!BBxxI", 4, 1, 0x61)
    pointer = struct.pack("!BBHH", 5, 1, 10, 10)
    cut = struct.pack("!BxxxI", 6, 3) + b"abc"
    resize = struct.pack("!BxHHBx", 251, 800, 600, 1) + b"\x00" * 16
    stream = handshake + pixel_format + encodings + key + pointer + cut + resize + update
    # Split at every byte: framing must not depend on how the WebSocket chunks it.
    out = b"".join(f.feed(stream[i : i + 1]) for i in range(len(stream)))
    assert out == handshake + pixel_format + encodings + update
    with pytest.raises(ValueError):
        f.feed(b"\x63garbage")


def test_sizes_and_detached_commands() -> None:
    assert parse_size("1280x800") == (1280, 800)
    for bad in ("1280", "0x0", "99999x1", "1280x800x2", "-5x10", "100x100"):
        with pytest.raises(InvalidRequest):
            parse_size(bad)
    cmd = detached(["xfce4-terminal", "--title", "x y"])
    assert cmd[:2] == ["/bin/sh", "-c"] and cmd[-3:] == ["xfce4-terminal", "--title", "x y"]
