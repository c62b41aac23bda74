"""SSH public keys read as OpenSSH reads them (ssh-keygen's own keys and fingerprints), and
what cannot be a key refused, so nothing a user sent reaches a box's sshd unparsed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from paddockd.domain.errors import InvalidRequest
from paddockd.domain.ssh import authorized_keys, parse_public_key, validate_key_name

ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIAups6MCT+BrWaGbvO0pV6cq5wV1W/u0DBfe4BRpvxGX"


def test_a_key_and_its_fingerprint_as_ssh_keygen_says() -> None:
    key = parse_public_key(f"ssh-ed25519 {ED25519} me@laptop\n")
    assert (key.kind, key.comment) == ("ssh-ed25519", "me@laptop")
    assert key.fingerprint == "SHA256:95aYOoww7cR9DlEV8rpkMH+HQZwTanIyiNXUKTTdBPQ"
    assert key.line == f"ssh-ed25519 {ED25519} me@laptop"


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen here")
@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
def test_keys_ssh_keygen_makes(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    said = subprocess.run(["ssh-keygen", "-l", "-f", f"{path}.pub"], capture_output=True, text=True)
    key = parse_public_key((tmp_path / "k.pub").read_text())
    assert said.stdout.split()[1] == key.fingerprint


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ssh-ed25519",
        f"ssh-rsa {ED25519}",  # the type it says is not the one it holds
        "ssh-ed25519 not-base64!!",
        f'command="rm -rf /" ssh-ed25519 {ED25519}',  # options are the server's to set
        f"ssh-ed25519 {ED25519} a\nssh-ed25519 {ED25519} b",  # a second line
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        f"ssh-dss {ED25519}",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5",  # a type and no key
    ],
)
def test_what_is_not_one_public_key_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_public_key(text)


def test_a_comment_keeps_to_plain_characters() -> None:
    key = parse_public_key(f"ssh-ed25519 {ED25519} me@laptop\tno\x1b[31mcolour $(x)")
    assert "\x1b" not in key.line and "$(" not in key.line and "\t" not in key.line
    assert authorized_keys([key]).count("\n") == 1


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b", "x" * 65, "../x"])
def test_key_names(name: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_key_name(name)
    assert validate_key_name("laptop-2026@home") == "laptop-2026@home"
