"""Connecting to a box's socket never follows what the box planted."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddockd.desktop.boxsocket import UnsafeSocket, connect_box_socket


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "elsewhere.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    yield path
    srv.close()


def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "run" / "desktop").mkdir(parents=True)
    return tmp_path / "run"


def test_connects_to_a_real_socket(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(run / "desktop" / "vnc.sock"))
    srv.listen(1)
    uid = os.getuid()
    with connect_box_socket(run, "desktop/vnc.sock", uid, 1.0):
        srv.accept()[0].close()
    srv.close()


def test_a_linked_socket_is_refused(tmp_path: Path, listener: Path) -> None:
    run = run_dir(tmp_path)
    (run / "desktop" / "vnc.sock").symlink_to(listener)
    with pytest.raises(UnsafeSocket):
        connect_box_socket(run, "desktop/vnc.sock", None, 1.0)


def test_a_linked_folder_is_refused(tmp_path: Path, listener: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "desktop").symlink_to(listener.parent)
    listener.rename(listener.with_name("vnc.sock"))
    with pytest.raises(UnsafeSocket):
        connect_box_socket(run, "desktop/vnc.sock", None, 1.0)


def test_not_a_socket_or_not_the_boxs_own_is_refused(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    (run / "desktop" / "vnc.sock").write_text("")
    with pytest.raises(UnsafeSocket):
        connect_box_socket(run, "desktop/vnc.sock", None, 1.0)
    (run / "desktop" / "vnc.sock").unlink()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(run / "desktop" / "vnc.sock"))
    with pytest.raises(UnsafeSocket):  # owned by this uid, not the box's range
        connect_box_socket(run, "desktop/vnc.sock", os.getuid() + 1, 1.0)
    srv.close()


def test_nothing_there_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        connect_box_socket(run_dir(tmp_path), "desktop/vnc.sock", None, 1.0)
