"""SSH into boxes (domain/ssh.py): the users' public keys, each box's host key, and the
command an SSH session runs in the box (`sshd -i` as root, over the exec WebSocket that
the caller's token opened: api/routes/execs.py)."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..domain.accounts import User, holder_of
from ..domain.errors import InvalidRequest
from ..domain.ssh import (
    MAX_KEYS,
    authorized_keys,
    parse_public_key,
    sshd_config,
    validate_key_name,
)
from ..runtime import inbox
from ..store.ssh import SshRepository, StoredKey
from .boxes import BoxService


def _new_host_key() -> tuple[str, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public.decode()


class SshService:
    def __init__(self, repo: SshRepository, boxes: BoxService) -> None:
        self._repo = repo
        self._boxes = boxes

    async def keys(self, caller: User | None = None) -> list[StoredKey]:
        return await self._repo.keys(holder_of(caller))

    async def add_key(self, name: str, text: str, caller: User | None = None) -> StoredKey:
        key = parse_public_key(text)
        return await self._repo.add(holder_of(caller), validate_key_name(name), key, MAX_KEYS)

    async def delete_key(self, name: str, caller: User | None = None) -> None:
        await self._repo.delete(holder_of(caller), name)

    async def _host_key(self, box_id: str) -> tuple[str, str]:
        return await self._repo.host_key(box_id) or await self._repo.keep_host_key(
            box_id, *_new_host_key()
        )

    async def host_key(self, ref: str, caller: User | None = None) -> str:
        """The box's host public key (made on first ask), for a known_hosts line."""
        box = await self._boxes.resolve(ref, caller)
        return (await self._host_key(box.id))[1]

    async def session(self, ref: str, caller: User | None = None) -> list[str]:
        """What one SSH session runs in the box, as root: the caller's keys may log in."""
        box = await self._boxes.resolve(ref, caller)
        keys = await self._repo.keys(holder_of(caller))
        if not keys:
            raise InvalidRequest(
                "you have no SSH key registered here: `paddock ssh-key add` (or let "
                "`paddock ssh` / `paddock ssh-config` register the CLI's own)"
            )
        private, _ = await self._host_key(box.id)
        return inbox.ssh_session(sshd_config(), authorized_keys([k.key for k in keys]), private)
