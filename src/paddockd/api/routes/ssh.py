"""/v1/ssh-keys: the caller's public keys for SSH into their boxes; /v1/boxes/{ref}/ssh: a
box's host key. The session itself is an exec over the WebSocket with `ssh: true`
(routes/execs.py)."""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter

from paddock.wire.models import NewSshKey, SshHostKey, SshKey, SshKeyList

from ...domain.ssh import parse_public_key
from ...services.boxes import BOX_USER
from ...store.ssh import StoredKey
from ..deps import Caller, Svc

router = APIRouter(tags=["ssh"])


def present(k: StoredKey) -> SshKey:
    return SshKey(
        name=k.name,
        type=k.key.kind,
        fingerprint=k.key.fingerprint,
        comment=k.key.comment,
        created_at=datetime.fromtimestamp(k.created_at, timezone.utc),
    )


@router.get("/ssh-keys", response_model=SshKeyList, summary="Your SSH public keys")
async def list_ssh_keys(svc: Svc, caller: Caller) -> SshKeyList:
    return SshKeyList(keys=[present(k) for k in await svc.ssh.keys(caller)])


@router.put(
    "/ssh-keys/{name}",
    status_code=201,
    response_model=SshKey,
    summary="Register a public key that may log in to your boxes over SSH",
)
async def add_ssh_key(name: str, body: NewSshKey, svc: Svc, caller: Caller) -> SshKey:
    return present(await svc.ssh.add_key(name, body.public_key, caller))


@router.delete("/ssh-keys/{name}", status_code=204, summary="Remove one of your SSH keys")
async def delete_ssh_key(name: str, svc: Svc, caller: Caller) -> None:
    await svc.ssh.delete_key(name, caller)


@router.get(
    "/boxes/{ref}/ssh",
    response_model=SshHostKey,
    summary="The box's SSH host key (made on first ask), for a pinned known_hosts line",
)
async def box_host_key(ref: str, svc: Svc, caller: Caller) -> SshHostKey:
    line = await svc.ssh.host_key(ref, caller)
    return SshHostKey(host_key=line, fingerprint=parse_public_key(line).fingerprint, user=BOX_USER)
