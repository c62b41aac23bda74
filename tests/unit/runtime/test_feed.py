"""A push's bytes over a socket in the box's run folder (runtime/feed.py): a socket only the
folder's owner may use, read by the in-box program, and the exec's stdin where the box has
no program to read it (runtime/inbox.py)."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.runtime import feed as feed_module
from paddockd.runtime import inbox
from paddockd.runtime import inbox_program as codes
from paddockd.runtime.base import STDERR, ExecSpec
from paddockd.runtime.fake import FakeExec
from paddockd.runtime.feed import Feed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hands the socket to another uid")


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def _pieces(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _run_folder(tmp_path: Path, owner: int = 231072) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    os.chown(run, owner, owner)
    return run


def test_the_socket_is_the_folder_owners_alone(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    feed = Feed.open(run)
    assert feed is not None
    try:
        (made,) = run.iterdir()
        st = made.lstat()
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert (st.st_uid, st.st_gid) == (231072, 231072)
        assert feed.box_path == f"/run/paddock/{made.name}"
    finally:
        feed.close()
    assert list(run.iterdir()) == []  # its name goes with it


def test_no_feed_where_the_folder_is_missing_or_a_link(tmp_path: Path) -> None:
    assert Feed.open(tmp_path / "missing") is None
    real = _run_folder(tmp_path)
    (tmp_path / "link").symlink_to(real)
    assert Feed.open(tmp_path / "link") is None
    assert list(real.iterdir()) == []


def test_the_program_unpacks_what_the_feed_sends(tmp_path: Path) -> None:
    run, dest = _run_folder(tmp_path, owner=0), tmp_path / "dest"
    dest.mkdir()
    archive = _tar({"a.txt": b"hello", "b.bin": os.urandom(3 << 20)})
    feed = Feed.open(run)
    assert feed is not None
    socket_path = str(run / feed.box_path.rsplit("/", 1)[1])
    program = subprocess.Popen(
        [sys.executable, "-c", inbox.PROGRAM, str(dest), socket_path], stderr=subprocess.PIPE
    )

    async def main() -> None:
        conn = await feed.accept()
        assert list(run.iterdir()) == []  # the name went at the connection
        await Feed.send(conn, _pieces(archive, 64 * 1024))

    try:
        anyio.run(main)
        _, err = program.communicate(timeout=30)
    finally:
        feed.close()
    assert program.returncode == 0, err
    assert (dest / "a.txt").read_bytes() == b"hello"
    assert (dest / "b.bin").stat().st_size == 3 << 20


def test_a_program_that_never_connects_ends_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "CONNECT_SECONDS", 0.2)
    feed = Feed.open(_run_folder(tmp_path))
    assert feed is not None

    async def main() -> None:
        with pytest.raises(OSError, match="did not connect"):
            await feed.accept()

    anyio.run(main)
    assert list((tmp_path / "run").iterdir()) == []


class _Scripted(FakeExec):
    """An exec whose program ends with `code`, having said `said` (and read its stdin)."""

    def __init__(self, spec: ExecSpec, code: int, said: bytes = b"") -> None:
        super().__init__(spec)
        self.code, self.said = code, said

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        if self.said:
            yield STDERR, self.said

    async def wait(self) -> int:
        return self.code


def test_a_box_without_python_is_fed_on_stdin(tmp_path: Path) -> None:
    """The script says so before anything is read: the same chunks go to a second exec."""
    execs: list[_Scripted] = []

    async def run_(spec: ExecSpec) -> _Scripted:
        fed = spec.cmd[-1].startswith("/run/paddock/")
        execs.append(_Scripted(spec, codes.NO_PROGRAM if fed else 0))
        return execs[-1]

    feed = Feed.open(_run_folder(tmp_path))
    assert feed is not None
    archive = _tar({"a.txt": b"hello"})
    anyio.run(lambda: inbox.put(run_, "/config/p", (1000, 1000), _pieces(archive), feed))
    assert [e.spec.stdin for e in execs] == [False, True]
    assert execs[0].spec.cmd[-4:] == ["/config/p", "1000", "1000", feed.box_path]
    assert execs[1].stdin == archive
    assert list((tmp_path / "run").iterdir()) == []


def test_a_program_that_fails_before_connecting_says_why(tmp_path: Path) -> None:
    async def run_(spec: ExecSpec) -> _Scripted:
        return _Scripted(spec, codes.NOT_A_DIRECTORY, b"/config/p is not a folder\n")

    feed = Feed.open(_run_folder(tmp_path))
    assert feed is not None

    async def main() -> None:
        with anyio.fail_after(10), pytest.raises(InvalidRequest, match="not a folder"):
            await inbox.put(run_, "/config/p", (0, 0), _pieces(b"x" * 512), feed)

    anyio.run(main)
