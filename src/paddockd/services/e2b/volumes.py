"""E2B's volume content API over a drive's files on the host (drive_files.py), for the
holder of the volume's token. The token is the one `Volume.create`/`get_info` hand out:
an HMAC of the holder, the user it was given to and the volume's name with a key of
paddockd's own, never stored, good for that volume only, and for no one once the user it
was given to is removed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from ... import drive_files
from ...domain.accounts import User, holder_of
from ...domain.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, Unauthorized
from ..drives import DriveService

PREFIX = "pdv_"
OWNER = "-"  # the owner's drives have no holder id
SLOTS = 4  # volume calls at work on the host's disk at once, whoever makes them
MAX_UNSIZED = 8 << 30  # one file written to a drive with no size of its own
T = TypeVar("T")


class VolumeContent:
    def __init__(
        self,
        drives: DriveService,
        key: bytes,
        user_exists: Callable[[str], Awaitable[bool]],
        userns_base: int | None,
    ) -> None:
        self._drives = drives
        self._key = key
        self._exists = user_exists
        self._owner = drive_files.Owner(userns_base)
        self._slots = asyncio.Semaphore(SLOTS)

    def _mac(self, who: str, issuer: str, name: str) -> str:
        raw = f"volume:{who}:{issuer}:{name}".encode()
        mac = hmac.new(self._key, raw, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def token(self, caller: User, name: str) -> str:
        """The token of the caller's volume `name`: good while the caller's account is."""
        who, issuer = holder_of(caller) or OWNER, caller.id or OWNER
        return f"{PREFIX}{who}_{issuer}_{self._mac(who, issuer, name)}"

    async def _volume(self, volume_id: str, authorization: str) -> tuple[str, int | None]:
        """The volume's folder and size, for its own token only."""
        scheme, _, token = authorization.partition(" ")
        # Ids are hex (or OWNER): no "_" in them; the MAC's base64 may hold some.
        who, _, rest = token.removeprefix(PREFIX).partition("_")
        issuer, _, mac = rest.partition("_")
        if (
            scheme.lower() != "bearer"
            or not token.startswith(PREFIX)
            or not (who and issuer)
            or not hmac.compare_digest(
                mac.encode("latin-1", "replace"), self._mac(who, issuer, volume_id).encode()
            )
        ):
            raise Unauthorized("not this volume's token (Volume.connect gives it)")
        if issuer != OWNER and not await self._exists(issuer):
            raise Unauthorized("the volume's token was given to a user no longer here")
        holder = None if who == OWNER else who
        try:
            return await self._drives.folder(volume_id, holder)
        except NotFound:
            raise NotFound(f"volume {volume_id!r} not found") from None

    async def _run(self, fn: Callable[[], T], path: str) -> T:
        try:
            async with self._slots:  # the loop's threads stay free for everything else
                return await asyncio.to_thread(fn)
        except drive_files.Missing:
            raise NotFound(f"path {path!r} not found on the volume") from None
        except drive_files.Exists as exc:
            raise Conflict(f"{exc.args[0] if exc.args else path} exists already") from None
        except drive_files.Unusable as exc:
            raise InvalidRequest(str(exc)) from None
        except OSError as exc:
            raise InvalidRequest(f"{path}: {exc.strerror or exc}") from None

    async def info(self, volume_id: str, auth: str, path: str) -> dict[str, Any]:
        root, _ = await self._volume(volume_id, auth)
        return await self._run(lambda: drive_files.info(root, path, self._owner), path)

    async def listing(
        self, volume_id: str, auth: str, path: str, depth: int
    ) -> list[dict[str, Any]]:
        root, _ = await self._volume(volume_id, auth)
        return await self._run(lambda: drive_files.listing(root, path, depth, self._owner), path)

    async def make_dir(
        self, volume_id: str, auth: str, path: str, ids: tuple[int, int, int], parents: bool
    ) -> dict[str, Any]:
        root, _ = await self._volume(volume_id, auth)
        return await self._run(
            lambda: drive_files.make_dir(root, path, parents, *ids, self._owner), path
        )

    async def set_metadata(
        self,
        volume_id: str,
        auth: str,
        path: str,
        uid: int | None,
        gid: int | None,
        mode: int | None,
    ) -> dict[str, Any]:
        root, _ = await self._volume(volume_id, auth)
        return await self._run(
            lambda: drive_files.set_metadata(root, path, uid, gid, mode, self._owner), path
        )

    async def remove(self, volume_id: str, auth: str, path: str) -> None:
        root, _ = await self._volume(volume_id, auth)
        await self._run(lambda: drive_files.remove(root, path), path)

    async def read(self, volume_id: str, auth: str, path: str) -> AsyncIterator[bytes]:
        """The file's bytes in chunks; checked (and opened) before the first one."""
        root, _ = await self._volume(volume_id, auth)
        held = drive_files.opened(root, path)
        fd = await self._run(held.__enter__, path)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while data := await self._run(partial(_read, fd), path):
                    yield data
            finally:
                held.__exit__(None, None, None)

        return chunks()

    async def write(
        self,
        volume_id: str,
        auth: str,
        path: str,
        ids: tuple[int, int, int],
        parents: bool,
        body: AsyncIterator[bytes],
    ) -> dict[str, Any]:
        """The body as the file at `path`, whole or not at all; at most what the drive
        holds (or MAX_UNSIZED for a drive with no size)."""
        root, size = await self._volume(volume_id, auth)
        cap = size if size is not None else MAX_UNSIZED
        writing = await self._run(
            lambda: drive_files.Writing(root, path, parents, *ids, self._owner), path
        )
        written = 0
        try:
            async for data in body:
                written += len(data)
                if written > cap:
                    raise PayloadTooLarge(f"more than the volume holds ({cap >> 20} MiB)")
                await self._run(partial(writing.write, data), path)
        except BaseException:
            await asyncio.to_thread(writing.abort)
            raise
        return await self._run(writing.done, path)


def _read(fd: int) -> bytes:
    return os.read(fd, drive_files.CHUNK)
