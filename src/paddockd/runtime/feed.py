"""A push's bytes handed to the program in a box over a socket in its run folder, past the
engine: through an exec's stdin dockerd and the shim copy every byte once more each, and on
a busy host those copies were most of a push's CPU.

paddockd listens on a socket of its own in the box's /run/paddock (a host tmpfs the box
has bound: runtime/runfs.py); the in-box program (runtime/inbox_program.py), started by an
exec as before, connects and reads the archive from it. The exec still carries what the
program says and how it ended.

The run folder is the box's to write, so nothing here follows a name in it: the socket is
bound through a descriptor of the folder, checked (a socket, host root's: a box cannot make
an inode of an id outside its range) before it is handed to the box's root, and given
mode 0600 first (the box's other users cannot connect). paddockd only sends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

BOX_FOLDER = "/run/paddock"  # where the box has its run folder
CONNECT_SECONDS = 30.0


class Feed:
    """One listening socket in a box's run folder, for one connection."""

    def __init__(self, folder: int, name: str, listener: socket.socket) -> None:
        self._folder, self._name, self._listener = folder, name, listener
        self.box_path = f"{BOX_FOLDER}/{name}"

    @classmethod
    def open(cls, run_dir: Path) -> Feed | None:
        """A socket in `run_dir` (the host side of the box's /run/paddock) that only the
        box's root can connect to; None where one cannot be made (a full run folder)."""
        try:
            folder = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        name = f".paddock-put-{secrets.token_hex(12)}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        feed = cls(folder, name, listener)
        try:
            # By the folder's descriptor: short whatever the data folder's path, and never
            # through a name the box could have swapped.
            listener.bind(f"/proc/self/fd/{folder}/{name}")
            owner = os.fstat(folder)
            node = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            try:
                made = os.fstat(node)
                if not stat.S_ISSOCK(made.st_mode) or made.st_uid != os.geteuid():
                    raise OSError(f"{name} was replaced in the box's run folder")
                # The very inode opened above, by its descriptor: mode first, so that it is
                # never open to the box's other users.
                os.chmod(f"/proc/self/fd/{node}", 0o600)
                os.chown(f"/proc/self/fd/{node}", owner.st_uid, owner.st_gid)
            finally:
                os.close(node)
            listener.listen(1)
            listener.setblocking(False)
        except OSError:
            feed.close()
            return None
        return feed

    async def accept(self) -> socket.socket:
        """The one connection (the listener and its name go once it is made)."""
        loop = asyncio.get_running_loop()
        try:
            conn, _ = await asyncio.wait_for(loop.sock_accept(self._listener), CONNECT_SECONDS)
        except TimeoutError:
            raise OSError("the program in the box did not connect") from None
        finally:
            self.close()
        conn.setblocking(False)
        return conn

    @staticmethod
    async def send(conn: socket.socket, chunks: AsyncIterator[bytes]) -> None:
        """Every chunk, then the end of the stream; stops quietly where the program
        stopped reading (its exit code says why)."""
        loop = asyncio.get_running_loop()
        with conn:
            try:
                async for chunk in chunks:
                    await loop.sock_sendall(conn, chunk)
                conn.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def close(self) -> None:
        if self._folder < 0:
            return
        self._listener.close()
        with contextlib.suppress(OSError):
            # Whatever has the name now goes: ours, or what the box put in its place.
            os.unlink(self._name, dir_fd=self._folder)
        os.close(self._folder)
        self._folder = -1
