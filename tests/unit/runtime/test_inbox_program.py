"""The program that unpacks a push inside a box (runtime/inbox_program.py): its own reading
of tar headers says what tarfile says of every header, and refuses what tarfile refuses."""

from __future__ import annotations

import io
import json
import os
import socket
import tarfile
import threading

import pytest

from paddockd.runtime.inbox import failure
from paddockd.runtime.inbox_program import (
    BAD_ARCHIVE,
    CONFLICT,
    Failure,
    _Archive,
    _member,
    _quoted,
)


def _header(info: tarfile.TarInfo, fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    return info.tobuf(fmt, "utf-8", "surrogateescape")[: tarfile.BLOCKSIZE]


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.uid, info.gid = kind, size, 1000, 1000
    return info


def _tarfiles(header: bytes) -> tuple[str, int, bytes, bool]:
    info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
    return info.name, info.size, info.type, info.isdir()


LONG = "a" * 90 + "/" + "b" * 60 + "/file.txt"  # past 100 bytes: a ustar prefix


@pytest.mark.parametrize(
    "header",
    [
        _header(_info("src/f.txt", size=10 * 1024)),
        _header(_info("src", tarfile.DIRTYPE)),
        _header(_info(LONG, size=3)),
        _header(_info("l", tarfile.SYMTYPE)),
        _header(_info("é/ü.txt", size=1)),
        _header(_info("big", size=8**11 - 1)),
        _header(_info("gnu.txt", size=5), tarfile.GNU_FORMAT),  # tarfile's own reading
        _header(_info("x" * 120, size=5), tarfile.GNU_FORMAT)[:512],
    ],
)
def test_a_header_reads_as_tarfile_reads_it(header: bytes) -> None:
    assert _member(header) == _tarfiles(header)


def test_an_old_style_folder_and_a_signed_checksum_read_as_tarfile_reads_them() -> None:
    v7 = bytearray(_header(_info("old/", tarfile.AREGTYPE)))
    assert _member(bytes(v7)) == _tarfiles(bytes(v7)) == ("old", 0, tarfile.DIRTYPE, True)
    # A name byte above 127 and the checksum as a signed sum: tarfile takes it, so do we.
    signed = bytearray(_header(_info("\udcff", size=1)))
    total = sum(b - 256 if b > 127 else b for b in signed[:148] + b" " * 8 + signed[156:])
    signed[148:156] = b"%06o\0 " % (total & 0o777777)
    assert _member(bytes(signed)) == _tarfiles(bytes(signed))


def test_what_is_no_header_is_refused() -> None:
    garbage = bytearray(_header(_info("f.txt", size=1)))
    garbage[0] ^= 1  # the checksum no longer matches
    with pytest.raises(Failure) as refused:
        _member(bytes(garbage))
    assert refused.value.code == BAD_ARCHIVE
    with pytest.raises(Failure):
        _member(b"x" * 512)


def test_a_whole_archive_is_walked_member_by_member() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("d", "d/" + "n" * 200, "d/f"):
            info = _info(name, tarfile.DIRTYPE if name == "d" else tarfile.REGTYPE, 3)
            tar.addfile(info, io.BytesIO(b"abc"))
    data, kinds, at = buf.getvalue(), [], 0
    while data[at : at + 512] != bytes(512):
        header = data[at : at + 512]
        _, size, kind, _ = found = _member(header)
        assert found == _tarfiles(header)
        kinds.append(kind)
        at += 512 + -(-size // 512) * 512
    # The long name's pax record first: the program reads the path from it.
    assert kinds == [tarfile.DIRTYPE, tarfile.XHDTYPE, tarfile.REGTYPE, tarfile.REGTYPE]


def test_a_ustar_header_is_read_without_tarfile(monkeypatch: pytest.MonkeyPatch) -> None:
    headers = [_header(_info(n, size=7)) for n in ("a.txt", LONG, "é.txt")]
    expected = [_tarfiles(h) for h in headers]

    def unused(*args: object) -> None:
        raise AssertionError("tarfile read a header the program reads itself")

    monkeypatch.setattr(tarfile.TarInfo, "frombuf", unused)
    assert [_member(h) for h in headers] == expected


def _through(archive: bytes, splice: bool, reads: list[int]) -> bytes:
    """What `_Archive` hands on to a pipe: `reads` bytes read here, then the rest passed."""
    src, feed = socket.socketpair()
    out_r, out_w = os.pipe()
    got = bytearray()
    writer = threading.Thread(target=lambda: (feed.sendall(archive), feed.close()))

    def read() -> None:
        while piece := os.read(out_r, 1 << 16):
            got.extend(piece)

    reader = threading.Thread(target=read)
    writer.start()
    reader.start()
    try:
        arc = _Archive(src.fileno())
        arc._splice = splice
        for n in reads:
            os.write(out_w, arc.exactly(n))
        arc.pass_on(out_w, len(archive) - sum(reads))
        assert arc.read(1) == b""  # nothing was read past what was asked
    finally:
        os.close(out_w)
        reader.join()
        writer.join()
        os.close(out_r)
        src.close()
    return bytes(got)


@pytest.mark.parametrize("splice", [True, False])
def test_a_members_data_is_handed_on_whole_by_splice_or_by_copy(
    splice: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    spliced = []
    real = os.splice
    monkeypatch.setattr(os, "splice", lambda *a: spliced.append(real(*a)) or spliced[-1])
    data = os.urandom(3 * 1024 * 1024 + 77)
    assert _through(data, splice, [512, 3]) == data
    assert _through(data, splice, []) == data
    small = os.urandom(1000)
    assert _through(small, splice, [512]) == small
    assert (sum(spliced) > 2 * 1024 * 1024) == splice  # the kernel moved the bulk of it


def test_an_archive_that_ends_in_a_member_is_refused() -> None:
    src, feed = socket.socketpair()
    feed.sendall(os.urandom(100_000))
    feed.close()
    out_r, out_w = os.pipe()
    drain = threading.Thread(target=lambda: [*iter(lambda: os.read(out_r, 1 << 16), b"")])
    drain.start()
    with pytest.raises(Failure) as refused:
        _Archive(src.fileno()).pass_on(out_w, 200_000)
    os.close(out_w)
    drain.join()
    os.close(out_r)
    src.close()
    assert refused.value.code == BAD_ARCHIVE


@pytest.mark.parametrize("path", ["/config/x", 'a"b', "a\\b", "new\nline", "é/ü", "\x7f"])
def test_a_path_in_a_message_is_a_json_string_without_a_bare_quote(path: str) -> None:
    quoted = _quoted(path)
    assert json.loads(quoted) == path
    assert '"' not in quoted[1:-1]


@pytest.mark.parametrize("path", ["/config/x", '/config/we"ird', "/config/new\nline"])
def test_a_refusal_names_the_path_as_it_is(path: str) -> None:
    said = f"cannot overwrite directory {_quoted(path)} with non-directory"
    refused = failure(CONFLICT, said, "/config")
    assert (
        refused.message
        == f"{path} in the box is a folder: a file cannot replace it (remove it first)"
    )
