"""SSH into a box: the public keys a user registers (checked as OpenSSH would read them, and
written back from their parts only), each box's host key pair, and what one session's
`sshd -i` is given in the box.

There is no SSH server listening anywhere. A session is one `sshd -i` started in the box
over an exec that the caller's Paddock token opened (the API's WebSocket), speaking SSH on
its stdin and stdout; the user's ssh client reaches it through `paddock ssh-proxy`. So
the token decides who may reach the box at all, and the keys only who logs in inside."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from .errors import InvalidRequest

# A session's keys travel in one argument of its exec (at most 128 KiB, MAX_ARG_STRLEN):
# 20 keys of 4 KiB (an RSA key of 16384 bits is 2.8 KiB) fit.
MAX_KEYS = 20  # per user
MAX_KEY_TEXT = 4096
KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_COMMENT = re.compile(r"[^A-Za-z0-9 ._@:+/=-]")
SSH_DIR = "/run/paddock/ssh"  # in the box, per session (a tmpfs: gone at each stop)


@dataclass(frozen=True)
class PublicKey:
    kind: str
    blob: bytes
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        """As `ssh-keygen -l` prints it: SHA256, base64 without padding."""
        digest = hashlib.sha256(self.blob).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")

    @property
    def line(self) -> str:
        """The key as an authorized_keys or known_hosts line reads it."""
        text = f"{self.kind} {base64.b64encode(self.blob).decode()}"
        return f"{text} {self.comment}" if self.comment else text


def validate_key_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidRequest(
            f"invalid key name {name!r}: up to 64 letters, digits and . _ @ - (e.g. laptop)"
        )
    return name


def parse_public_key(text: str) -> PublicKey:
    """An OpenSSH public key line (`TYPE BASE64 [COMMENT]`, as in `id_ed25519.pub`); its
    type is read from the key itself and must match. Options before the type are refused:
    the server decides what a key may do."""
    if len(text) > MAX_KEY_TEXT or "\n" in text.strip() or "\r" in text or "\0" in text:
        raise InvalidRequest("a public key is one line of text, like id_ed25519.pub")
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        raise InvalidRequest(
            "not an OpenSSH public key (TYPE BASE64 [COMMENT], e.g. the contents of "
            "~/.ssh/id_ed25519.pub; a private key is never wanted)"
        )
    try:
        blob = base64.b64decode(parts[1], validate=True)
        (length,) = struct.unpack(">I", blob[:4])
        inner = blob[4 : 4 + length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise InvalidRequest("the public key's base64 does not decode") from None
    if inner != parts[0] or len(blob) < 4 + length + 16:
        raise InvalidRequest(f"the key says {parts[0]} but holds {inner or 'something else'}")
    comment = _COMMENT.sub("", parts[2])[:100] if len(parts) > 2 else ""
    return PublicKey(parts[0], blob, comment.strip())


def authorized_keys(keys: list[PublicKey]) -> str:
    # Written from the parsed parts only: nothing a user sent reaches sshd unparsed.
    return "".join(f"{k.line}\n" for k in keys)


def sshd_config() -> str:
    """The one session's sshd: keys only, root by key too (the box's owner is root in it),
    forwarding for editors' remotes, sftp built in, nothing written to the box's logs."""
    return "\n".join(
        [
            f"HostKey {SSH_DIR}/host_key",
            f"AuthorizedKeysFile {SSH_DIR}/authorized_keys",
            "AuthenticationMethods publickey",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "StrictModes yes",
            "AllowTcpForwarding yes",
            "AllowStreamLocalForwarding yes",
            "AllowAgentForwarding yes",
            "X11Forwarding no",
            "PermitTunnel no",
            "PermitUserEnvironment no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            "PidFile none",
            "LogLevel ERROR",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )
